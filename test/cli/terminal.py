#!/usr/bin/env python3
# Runs a command under a new pseudo-terminal of ROWS x COLS (0 0: a terminal without a size, as
# under `script`), relays what it prints to stdout and what arrives on stdin to the terminal (so
# the byte 0x03 is a Ctrl-C and 0x04 a Ctrl-D), and exits with the command's exit status
# (128 + N when signal N ended it). Usage: terminal.py ROWS COLS COMMAND [ARG...]
import fcntl
import os
import pty
import select
import struct
import sys
import termios

rows, cols = int(sys.argv[1]), int(sys.argv[2])
command = sys.argv[3:]
pid, fd = pty.fork()
if pid == 0:
    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    os.execvp(command[0], command)

stdin_open = True
while True:
    readable, _, _ = select.select([fd] + ([0] if stdin_open else []), [], [])
    if fd in readable:
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the command closed the terminal
            data = b""
        if not data:
            break
        os.write(1, data)
    if 0 in readable:
        data = os.read(0, 65536)
        if data:
            os.write(fd, data)
        else:
            stdin_open = False
_, status = os.waitpid(pid, 0)
code = os.waitstatus_to_exitcode(status)
sys.exit(128 - code if code < 0 else code)
