"""Drives a server over stdio, one call at a time, for instruction counts under callgrind.

    python3 drive.py KIND N -- COMMAND...

KIND is `add_task` (N calls of it), `get` (one run started as a task and waited for, then
N `tasks/get` of it) or `task` (N runs started as tasks, each waited for with
`tasks/result`, then a `tasks/get` of each); all in a 2025-11-25 session. COMMAND is the
server (under valgrind, say); it gets a database, a workflow folder and a workspace in a
fresh temporary folder.
"""
import json
import os
import subprocess
import sys
import tempfile

kind, n = sys.argv[1], int(sys.argv[2])
command = sys.argv[sys.argv.index("--") + 1:]
folder = tempfile.mkdtemp()
os.makedirs(os.path.join(folder, "workflows"))
os.makedirs(os.path.join(folder, "workspace"))
server = subprocess.Popen(
    command + ["--db", os.path.join(folder, "bench.db"),
               "--workflows", os.path.join(folder, "workflows"),
               "--workspace", os.path.join(folder, "workspace")],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
last_id = 0


def send(message):
    server.stdin.write(json.dumps(message) + "\n")
    server.stdin.flush()


def request(method, params):
    """Sends a request and returns its reply, passing over notifications."""
    global last_id
    last_id += 1
    send({"jsonrpc": "2.0", "id": last_id, "method": method, "params": params})
    while True:
        reply = json.loads(server.stdout.readline())
        if reply.get("id") == last_id and ("result" in reply or "error" in reply):
            if "error" in reply:
                sys.exit(f"{method} failed: {reply['error']}")
            return reply["result"]


def start_task():
    definition = {"name": "one", "nodes": {"a": {"tool": "add_task", "args": {"title": "x"}}}}
    result = request("tools/call", {"name": "run_workflow",
                                    "arguments": {"definition": definition},
                                    "task": {"ttl": 60000}})
    return result["task"]["taskId"]


request("initialize", {"protocolVersion": "2025-11-25",
                       "capabilities": {"tasks": {"requests": {"tools": {"call": {}}}}},
                       "clientInfo": {"name": "drive", "version": "1"}})
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
if kind == "add_task":
    for k in range(n):
        request("tools/call", {"name": "add_task", "arguments": {"title": f"t{k}"}})
elif kind == "get":
    task = start_task()
    request("tasks/result", {"taskId": task})
    for _ in range(n):
        request("tasks/get", {"taskId": task})
elif kind == "task":
    for _ in range(n):
        task = start_task()
        request("tasks/result", {"taskId": task})
        request("tasks/get", {"taskId": task})
else:
    sys.exit(f"unknown kind {kind}")
server.stdin.close()
server.wait()
