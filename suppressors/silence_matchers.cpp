#include "suppressors/silence_matchers.h"

#include <bitset>
#include <cctype>
#include <functional>
#include <memory>

#include "detector/logfmt.h"

namespace sbd {
namespace {

// Longest pattern and deepest nesting evaluated; anything bigger is assumed to match.
constexpr size_t kMaxPatternBytes = 1024;
constexpr int kMaxDepth = 64;

struct Unsupported {};

using ByteSet = std::bitset<256>;

// A Thompson automaton: a state consumes one byte in `set`, or splits (epsilon) to `out` and
// `alt`, or accepts.
struct State {
  enum Kind { kByte, kSplit, kAccept } kind = kAccept;
  ByteSet set;
  int out = -1;
  int alt = -1;
};

// Recursive descent over the pattern, compiling each piece in front of its continuation.
class Compiler {
 public:
  explicit Compiler(const std::string& pattern) : p_(pattern) {}

  // Returns the start state; throws Unsupported.
  int Compile(std::vector<State>* states) {
    states_ = states;
    const int accept = Add({State::kAccept, {}, -1, -1});
    const int start = Alternation(accept, 0);
    if (i_ != p_.size()) throw Unsupported{};  // an unbalanced ')'
    return start;
  }

 private:
  using Piece = std::function<int(int)>;

  int Add(State s) {
    states_->push_back(std::move(s));
    return static_cast<int>(states_->size()) - 1;
  }

  // Branches are compiled lazily (as closures) so that each can be built before any
  // continuation: a group repeated by `*` compiles its body with the loop state as next.
  int Alternation(int next, int depth) { return AlternationPiece(depth)(next); }

  Piece AlternationPiece(int depth) {
    if (depth > kMaxDepth) throw Unsupported{};
    std::vector<Piece> branches = {ConcatPiece(depth)};
    while (i_ < p_.size() && p_[i_] == '|') {
      ++i_;
      branches.push_back(ConcatPiece(depth));
    }
    return [this, branches](int next) {
      int start = branches.back()(next);
      for (size_t b = branches.size() - 1; b-- > 0;) {
        start = Add({State::kSplit, {}, branches[b](next), start});
      }
      return start;
    };
  }

  Piece ConcatPiece(int depth) {
    std::vector<Piece> pieces;
    while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')') pieces.push_back(Repeat(depth));
    return [pieces](int next) {
      for (size_t k = pieces.size(); k-- > 0;) next = pieces[k](next);
      return next;
    };
  }

  Piece Repeat(int depth) {
    Piece atom = Atom(depth);
    while (i_ < p_.size() && (p_[i_] == '*' || p_[i_] == '+' || p_[i_] == '?')) {
      const char op = p_[i_++];
      if (i_ < p_.size() && p_[i_] == '?') ++i_;  // lazy: the same language
      atom = [this, atom, op](int next) {
        if (op == '?') return Add({State::kSplit, {}, atom(next), next});
        const int loop = Add({State::kSplit, {}, -1, next});
        const int body = atom(loop);
        (*states_)[loop].out = body;
        return op == '*' ? loop : body;
      };
    }
    if (i_ < p_.size() && p_[i_] == '{') throw Unsupported{};
    return atom;
  }

  Piece Bytes(ByteSet set) {
    return [this, set](int next) { return Add({State::kByte, set, next, -1}); };
  }

  Piece Atom(int depth) {
    const char c = p_[i_++];
    if (c == '(') {
      if (i_ < p_.size() && p_[i_] == '?') {
        if (p_.compare(i_, 2, "?:") != 0) throw Unsupported{};  // flags, named groups
        i_ += 2;
      }
      Piece inner = AlternationPiece(depth + 1);
      if (i_ >= p_.size() || p_[i_] != ')') throw Unsupported{};
      ++i_;
      return inner;
    }
    if (c == '^' || c == '$') return [](int next) { return next; };  // anchored anyway
    if (c == '*' || c == '+' || c == '?' || c == '{') throw Unsupported{};
    if (c == '.') return Bytes(ByteSet().set().reset('\n'));
    if (c == '[') return Bytes(Class());
    if (c == '\\') return Bytes(Escape());
    ByteSet one;
    one.set(static_cast<unsigned char>(c));
    return Bytes(one);
  }

  ByteSet Escape() {
    if (i_ >= p_.size()) throw Unsupported{};
    const unsigned char c = static_cast<unsigned char>(p_[i_++]);
    ByteSet set;
    auto range = [&](char a, char b) {
      for (int x = a; x <= b; ++x) set.set(static_cast<unsigned char>(x));
    };
    switch (c) {
      case 'd':
      case 'D':
        range('0', '9');
        return c == 'D' ? ~set : set;
      case 'w':
      case 'W':
        range('0', '9'), range('a', 'z'), range('A', 'Z'), set.set('_');
        return c == 'W' ? ~set : set;
      case 's':
      case 'S':
        for (char x : {' ', '\t', '\n', '\f', '\r'}) set.set(static_cast<unsigned char>(x));
        return c == 'S' ? ~set : set;
      default:
        if (std::isalnum(c)) throw Unsupported{};  // \b, \pL, \x41, ...
        set.set(c);
        return set;
    }
  }

  ByteSet Class() {
    ByteSet set;
    const bool negate = i_ < p_.size() && p_[i_] == '^';
    if (negate) ++i_;
    bool first = true;
    while (i_ < p_.size() && (p_[i_] != ']' || first)) {
      first = false;
      if (p_.compare(i_, 2, "[:") == 0) throw Unsupported{};
      ByteSet item;
      unsigned char low = p_[i_] == '\\' ? 0 : static_cast<unsigned char>(p_[i_]);
      if (p_[i_] == '\\') {
        ++i_;
        item = Escape();
        if (item.count() != 1) {
          set |= item;
          continue;
        }
        while (!item.test(low)) ++low;
      } else {
        ++i_;
      }
      if (i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
        const unsigned char high = static_cast<unsigned char>(p_[i_ + 1]);
        if (p_[i_ + 1] == '\\' || high < low) throw Unsupported{};
        for (int x = low; x <= high; ++x) set.set(static_cast<unsigned char>(x));
        i_ += 2;
      } else {
        set.set(low);
      }
    }
    if (i_ >= p_.size()) throw Unsupported{};
    ++i_;
    return negate ? ~set : set;
  }

  const std::string& p_;
  size_t i_ = 0;
  std::vector<State>* states_ = nullptr;
};

// Adds `s` and every state reachable from it without consuming a byte.
void Close(const std::vector<State>& states, int s, std::vector<char>* in, std::vector<int>* set) {
  std::vector<int> stack = {s};
  while (!stack.empty()) {
    const int at = stack.back();
    stack.pop_back();
    if (at < 0 || (*in)[at]) continue;
    (*in)[at] = 1;
    set->push_back(at);
    if (states[at].kind == State::kSplit) {
      stack.push_back(states[at].alt);
      stack.push_back(states[at].out);
    }
  }
}

// 1 when `pattern` matches `text`, 0 when not, -1 when the pattern is not understood.
int RegexMatch(const std::string& pattern, const std::string& text) {
  if (pattern.size() > kMaxPatternBytes) return -1;
  std::vector<State> states;
  int start = 0;
  try {
    start = Compiler(pattern).Compile(&states);
  } catch (const Unsupported&) {
    return -1;
  }
  std::vector<int> current;
  std::vector<char> in(states.size(), 0);
  Close(states, start, &in, &current);
  for (const char c : text) {
    std::vector<int> next;
    std::vector<char> in_next(states.size(), 0);
    for (int s : current) {
      if (states[s].kind == State::kByte && states[s].set.test(static_cast<unsigned char>(c))) {
        Close(states, states[s].out, &in_next, &next);
      }
    }
    current = std::move(next);
    if (current.empty()) return 0;
  }
  for (int s : current) {
    if (states[s].kind == State::kAccept) return 1;
  }
  return 0;
}

}  // namespace

bool RegexMayMatch(const std::string& pattern, const std::string& text) {
  return RegexMatch(pattern, text) != 0;
}

bool MatchersMayMatch(const std::vector<SilenceMatcher>& matchers,
                      const std::map<std::string, std::string>& labels) {
  for (const auto& m : matchers) {
    const auto it = labels.find(m.name);
    const std::string value = it == labels.end() ? "" : it->second;
    // -1 (a pattern not understood) may match either way: the silence may hide the alert.
    const int matches = m.is_regex ? RegexMatch(m.value, value) : (m.value == value ? 1 : 0);
    if (m.is_equal ? matches == 0 : matches == 1) return false;
  }
  return true;
}

std::string FormatMatchers(const std::vector<SilenceMatcher>& matchers) {
  std::string out = "{";
  for (const auto& m : matchers) {
    if (out.size() > 1) out += ", ";
    out += LogfmtEscape(m.name) + (m.is_equal ? "" : "!") + (m.is_regex ? "=~" : "=") + "\"" +
           LogfmtEscape(m.value) + "\"";
  }
  return out + "}";
}

}  // namespace sbd
