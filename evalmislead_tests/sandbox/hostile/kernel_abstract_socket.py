# Abstract Unix sockets do not cross tests of one run: a name one test holds (in a process it leaves behind)
# is free for the next, and a connection one test queues on a socket the module bound at import is not
# there for the next test to accept.
import socket
import subprocess
import sys

HELD = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
HELD.bind("\0evalmislead-import")
HELD.listen(8)
HOLDER = "import socket, time; s = socket.socket(socket.AF_UNIX); s.bind('\\0evalmislead-held'); s.listen(1); time.sleep(60)"


def test_holds_a_name_and_queues_a_connection():
    subprocess.Popen([sys.executable, "-c", HOLDER], start_new_session=True)
    try:
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect("\0evalmislead-import")
        client.sendall(b"from the first test")
    except OSError:
        pass


def test_finds_the_name_free_and_nothing_queued():
    free = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    free.bind("\0evalmislead-held")
    HELD.setblocking(False)
    try:
        conn, _ = HELD.accept()
    except BlockingIOError:
        return
    raise AssertionError(f"a connection from another test was waiting: {conn.recv(100)!r}")
