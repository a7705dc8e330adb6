#!/usr/bin/python3
"""A candidate of a ZooKeeper lock for the zookeeper_lock tests (issue 27): real kazoo.

Takes kazoo's Lock on --path with --identifier as its data, and exports its belief as
leader_election_master_status{name=<lock>,token=<czxid of its own node>} 1 (0 while waiting)
on 127.0.0.1:<--metrics-port>/metrics. Like a naive application it never listens to its
session's state: frozen (SIGSTOP) past its session timeout and resumed, it still claims.
SIGUSR1 releases the lock and queues again.

With --storage-port, once a second while it believes it holds (and at once when back from a
pause) it also writes to the protected resource (tests/support/token_storage.cpp) with its
token: POST /write?token=<czxid>, as etcd_candidate does.
"""
import argparse
import http.client
import http.server
import signal
import threading
import time

from kazoo.client import KazooClient

parser = argparse.ArgumentParser()
parser.add_argument("--hosts", required=True)
parser.add_argument("--path", required=True)
parser.add_argument("--identifier", required=True)
parser.add_argument("--lock", default="orders")
parser.add_argument("--session-timeout", type=float, default=3.0)
parser.add_argument("--metrics-port", type=int, required=True)
parser.add_argument("--storage-port", type=int, default=0)
args = parser.parse_args()

state = {"claims": False, "token": "", "acquisitions": 0}
resign = threading.Event()
client = KazooClient(hosts=args.hosts, timeout=args.session_timeout)
client.start(timeout=10)


def campaign():
    while True:
        lock = client.Lock(args.path, args.identifier)
        lock.acquire()
        _, stat = client.get(args.path + "/" + lock.node)
        state["token"] = str(stat.czxid)
        state["claims"] = True
        state["acquisitions"] += 1
        resign.wait()
        resign.clear()
        state["claims"] = False
        lock.release()


def write(token):
    try:
        conn = http.client.HTTPConnection("127.0.0.1", args.storage_port, timeout=0.5)
        conn.request("POST", "/write?token=" + token, body=b"")
        conn.getresponse().read()
        conn.close()
    except OSError:
        pass


def writer():
    """The holder's work: a write with its token once a second, and at once on resumption."""
    last_write = 0.0
    last_tick = time.monotonic()
    while True:
        time.sleep(0.01)
        now = time.monotonic()
        resumed = now - last_tick > 0.5
        last_tick = now
        if state["claims"] and (resumed or now - last_write >= 1.0):
            write(state["token"])
            last_write = time.monotonic()


class Metrics(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        token = state["token"]
        body = "zk_candidate_acquisitions_total %d\n" % state["acquisitions"]
        if token:
            body += 'leader_election_master_status{name="%s",token="%s"} %d\n' % (
                args.lock, token, 1 if state["claims"] else 0)
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *unused):
        pass


signal.signal(signal.SIGUSR1, lambda *unused: resign.set())
signal.signal(signal.SIGTERM, lambda *unused: (client.stop(), exit(0)))
threading.Thread(target=campaign, daemon=True).start()
if args.storage_port:
    threading.Thread(target=writer, daemon=True).start()
http.server.HTTPServer(("127.0.0.1", args.metrics_port), Metrics).serve_forever()
