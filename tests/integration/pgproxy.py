"""A TCP proxy on loopback between gateways and PostgreSQL that loses
one write's answer on purpose (tests of commits whose outcome is unknown).

Every accepted connection is pumped to the server both ways. Armed with
a prepared statement's name (arm(name, mode)), the next Bind of that
statement a client sends (the protocol's 'B' message naming it, never the
Parse that prepares it) is:
- "answer": forwarded, and the server's next bytes on that connection
  (its answer: sent once the implicit transaction committed at the Sync
  that follows the Bind) dropped, both sides closed: committed, answer lost;
- "swallow": not forwarded, both sides closed: never committed, though the
  client had sent it.
With then_block the proxy then blocks: block() closes every connection
and refuses new ones (accepts and closes at once) until unblock(): the
database unreachable. Loopback only; every thread is a daemon and close()
ends them."""
import re
import socket
import threading

from conftest import free_port


class PgProxy:
    def __init__(self, port):
        self.target = ("127.0.0.1", port)
        self.lock = threading.Lock()
        self.armed = None           # (Bind pattern, mode, then_block)
        self.fired = []             # modes that fired, in order
        self.blocked = False
        self.conns = set()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", free_port()))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.running = True
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, stmt, mode, then_block=False):
        with self.lock:
            self.armed = (re.compile(rb"B....\x00" + re.escape(stmt.encode()) + rb"\x00",
                                     re.S), mode, then_block)

    def block(self):
        with self.lock:
            self.blocked = True
            conns = list(self.conns)
        for pair in conns:
            self._close(pair)

    def unblock(self):
        with self.lock:
            self.blocked = False

    def close(self):
        self.running = False
        self.block()
        self.sock.close()

    def _close(self, pair):
        for s in pair:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        with self.lock:
            self.conns.discard(pair)

    def _accept(self):
        while self.running:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                blocked = self.blocked
            if blocked:
                c.close()
                continue
            try:
                s = socket.create_connection(self.target, timeout=5)
            except OSError:
                c.close()
                continue
            s.settimeout(None)
            pair = (c, s)
            state = {"cut": False}
            with self.lock:
                self.conns.add(pair)
            threading.Thread(target=self._up, args=(pair, state), daemon=True).start()
            threading.Thread(target=self._down, args=(pair, state), daemon=True).start()

    def _up(self, pair, state):
        """Client to server."""
        c, s = pair
        try:
            while True:
                data = c.recv(65536)
                if not data:
                    break
                with self.lock:
                    armed = self.armed
                    hit = armed is not None and armed[0].search(data) is not None
                    if hit:
                        self.armed = None
                        self.fired.append(armed[1])
                if hit and armed[1] == "swallow":
                    state["block"] = armed[2]
                    break
                if hit:
                    state["block"] = armed[2]
                    state["cut"] = True
                s.sendall(data)
        except OSError:
            pass
        if not state["cut"]:
            self._close(pair)
        if state.get("block") and not state["cut"]:
            self.block()

    def _down(self, pair, state):
        """Server to client: the answer after a cut Bind is dropped."""
        c, s = pair
        try:
            while True:
                data = s.recv(65536)
                if not data or state["cut"]:
                    break
                c.sendall(data)
        except OSError:
            pass
        self._close(pair)
        if state.get("block") and state["cut"]:
            self.block()
