#!/usr/bin/python3
"""A candidate of a ZooKeeper lock for the zookeeper_lock tests (issue 27): real kazoo.

Takes kazoo's Lock on --path with --identifier as its data, and exports its belief as
leader_election_master_status{name=<lock>,token=<czxid of its own node>} 1 (0 while waiting)
on 127.0.0.1:<--metrics-port>/metrics. Like a naive application it never listens to its
session's state: frozen (SIGSTOP) past its session timeout and resumed, it still claims.
SIGUSR1 releases the lock and queues again.
"""
import argparse
import http.server
import signal
import threading

from kazoo.client import KazooClient

parser = argparse.ArgumentParser()
parser.add_argument("--hosts", required=True)
parser.add_argument("--path", required=True)
parser.add_argument("--identifier", required=True)
parser.add_argument("--lock", default="orders")
parser.add_argument("--session-timeout", type=float, default=3.0)
parser.add_argument("--metrics-port", type=int, required=True)
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
http.server.HTTPServer(("127.0.0.1", args.metrics_port), Metrics).serve_forever()
