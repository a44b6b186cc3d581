#!/usr/bin/env python3
"""What reading and following files costs, for server builds side by side.

    benches/side_by_side/resources.py ROUNDS NAME=BINARY [NAME=BINARY...]

Each round starts each build in turn (the order alternates from round to round) over HTTP
with a tokens file, on a fresh database; a principal writes 64 notes of 256 KiB through
the `note` workflow (tests/fixtures/resources), then:

- read: 300 `resources/read` of one of its notes, one after another; the median and the
  90th percentile of their times, as the client sees them;
- change: 40 changes of the store (an `add_task`, 300 ms apart, so that each is a change
  the subscriptions look at), first with nothing followed, then with the 64 notes
  followed by `resources/subscribe`; the server's CPU time (user and system, from
  /proc/PID/stat) for each change, and the difference the 64 subscriptions make.

Prints one line per build and round, then the medians per build and, for each build after
the first, the ratio of its medians to the first's.
"""
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NOTES = os.path.join(HERE, "..", "..", "tests", "fixtures", "resources")
TOKEN = "bench-3f9a7c1e5b2d8f4a6c0e9b7d3a1f5c8e2b6d0a4f"
NOTE_BYTES = 256 * 1024
FOLLOWED = 64
READS = 300
CHANGES = 40
TICKS = os.sysconf("SC_CLK_TCK")


class Server:
    def __init__(self, binary):
        self.dir = tempfile.mkdtemp()
        os.makedirs(os.path.join(self.dir, "workspace"))
        tokens = os.path.join(self.dir, "tokens")
        with open(tokens, "w") as f:
            f.write(f"alice {TOKEN}\n")
        os.chmod(tokens, 0o600)
        self.log = open(os.path.join(self.dir, "server.log"), "w+")
        self.process = subprocess.Popen(
            [binary, "--db", os.path.join(self.dir, "tasks.db"),
             "--workspace", os.path.join(self.dir, "workspace"),
             "--workflows", NOTES, "--http", "127.0.0.1:0", "--http-tokens", tokens,
             "serve"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log,
            env={**os.environ, "RUST_LOG": "info"})
        self.port = self.wait_for_port()
        self.connection = http.client.HTTPConnection("127.0.0.1", self.port)
        self.headers = {"Authorization": f"Bearer {TOKEN}",
                        "Content-Type": "application/json",
                        "Accept": "application/json, text/event-stream",
                        "Host": f"127.0.0.1:{self.port}"}
        self.next_id = 0
        reply = self.post("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                         "clientInfo": {"name": "bench", "version": "1"}})
        self.headers["Mcp-Session-Id"] = reply["session"]
        self.headers["MCP-Protocol-Version"] = "2025-11-25"
        self.notify("notifications/initialized")

    def wait_for_port(self):
        deadline = time.time() + 20
        while time.time() < deadline:
            self.log.seek(0)
            for line in self.log.read().splitlines():
                if "http://" in line:
                    return int(line.split("http://")[1].split("/")[0].rsplit(":", 1)[1])
            time.sleep(0.02)
        raise RuntimeError("the server did not say where it listens")

    def send(self, message):
        self.connection.request("POST", "/mcp", json.dumps(message), self.headers)
        response = self.connection.getresponse()
        body = response.read().decode()
        return response, body

    def post(self, method, params):
        self.next_id += 1
        response, body = self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                                    "params": params})
        for line in [body] + [l[5:] for l in body.splitlines() if l.startswith("data:")]:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                message["result"]["session"] = response.getheader("mcp-session-id")
                return message["result"]
        raise RuntimeError(f"no answer to {method}: {response.status} {body[:200]}")

    def notify(self, method):
        self.send({"jsonrpc": "2.0", "method": method})

    def call(self, tool, arguments):
        return self.post("tools/call", {"name": tool, "arguments": arguments})

    def cpu_seconds(self):
        with open(f"/proc/{self.process.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS

    def stop(self):
        self.connection.close()
        self.process.kill()
        self.process.wait()


def note_uri(result):
    return next(item["uri"] for item in result["content"] if item["type"] == "resource_link")


def changes_cost(server):
    """The server's CPU seconds per change of the store, over CHANGES changes."""
    before = server.cpu_seconds()
    for n in range(CHANGES):
        server.call("add_task", {"title": f"change {n}"})
        time.sleep(0.3)
    return (server.cpu_seconds() - before) / CHANGES


def measure(binary):
    server = Server(binary)
    try:
        uris = [note_uri(server.call("run_workflow", {"workflow": "note", "inputs": {
            "name": f"n{n}", "text": chr(ord("a") + n % 26) * NOTE_BYTES}}))
            for n in range(FOLLOWED)]
        times = []
        for _ in range(READS):
            started = time.perf_counter()
            server.post("resources/read", {"uri": uris[0]})
            times.append(time.perf_counter() - started)
        times.sort()
        quiet = changes_cost(server)
        for uri in uris:
            server.post("resources/subscribe", {"uri": uri})
        followed = changes_cost(server)
        return {"read_p50_us": times[len(times) // 2] * 1e6,
                "read_p90_us": times[len(times) * 9 // 10] * 1e6,
                "change_ms": quiet * 1e3,
                "change_followed_ms": followed * 1e3,
                "followed_extra_ms": (followed - quiet) * 1e3}
    finally:
        server.stop()


def main():
    rounds = int(sys.argv[1])
    builds = [pair.split("=", 1) for pair in sys.argv[2:]]
    results = {name: [] for name, _ in builds}
    for round_ in range(rounds):
        order = builds if round_ % 2 == 0 else list(reversed(builds))
        for name, binary in order:
            row = measure(binary)
            results[name].append(row)
            print(name, round_, json.dumps({k: round(v, 3) for k, v in row.items()}), flush=True)
    medians = {name: {key: statistics.median(row[key] for row in rows) for key in rows[0]}
               for name, rows in results.items()}
    first = builds[0][0]
    for name, median in medians.items():
        print("median", name, json.dumps({k: round(v, 3) for k, v in median.items()}))
        if name != first:
            ratios = {k: round(v / medians[first][k], 3) if medians[first][k] else None
                      for k, v in median.items()}
            print("ratio", name, "/", first, json.dumps(ratios))


if __name__ == "__main__":
    main()
