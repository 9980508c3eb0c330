#!/usr/bin/env python3
"""A mover-demo agent for `agentbox run --agent exec`, using only Python's
standard library. It reads one JSON observation per line on stdin and
answers one JSON action per line on stdout:

    agentbox run examples/mover --agent exec -- python3 examples/agents/mover_agent.py

It does what the built-in demo agent does: find the green square, hold
Right, wait a second, check the square moved at least 100 px, release the
key, and finish. Screenshots arrive as PNG files; the small decoder below
is enough for the 8-bit RGB(A) PNGs agentbox writes.
"""
import json
import struct
import sys
import zlib


def decode_png(path):
    """Return (width, height, channels, rows) for an 8-bit RGB/RGBA PNG."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, width = 8, [], None
    while pos < len(data):
        length, ctype = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if ctype == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            if depth != 8 or color not in (2, 6):
                raise ValueError("only 8-bit RGB/RGBA PNGs are supported")
            channels = 3 if color == 2 else 4
        elif ctype == b"IDAT":
            idat.append(body)
        elif ctype == b"IEND":
            break
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        ftype, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if ftype == 1:  # Sub
            for i in range(channels, stride):
                line[i] = (line[i] + line[i - channels]) & 0xFF
        elif ftype == 2:  # Up
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev))
        elif ftype == 3:  # Average
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif ftype == 4:  # Paeth
            for i in range(stride):
                a = line[i - channels] if i >= channels else 0
                b = prev[i]
                c = prev[i - channels] if i >= channels else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        rows.append(line)
        prev = line
    return width, height, channels, rows


def green_centroid(path):
    """The mean x of clearly green pixels (g > 180, r < 80, b < 80)."""
    width, height, channels, rows = decode_png(path)
    total, count = 0, 0
    for row in rows:
        if b"\xff" not in row:  # a quick skip: the square is pure green
            continue
        for x in range(width):
            r, g, b = row[x * channels], row[x * channels + 1], row[x * channels + 2]
            if g > 180 and r < 80 and b < 80:
                total += x
                count += 1
    return total / count if count else None


def send(action):
    sys.stdout.write(json.dumps(action) + "\n")
    sys.stdout.flush()


def main():
    start_x, phase = None, 0
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["type"] == "start":
            print(f"task: {msg['task']!r} on a {msg['screen']['width']}x{msg['screen']['height']} screen", file=sys.stderr)
            continue
        if msg["type"] == "error":
            print(f"agentbox rejected my answer: {msg['error']}", file=sys.stderr)
            send({"action": "done", "success": False, "message": "I sent an invalid action"})
            continue
        phase += 1
        if phase == 1:
            start_x = green_centroid(msg["screenshot"])
            if start_x is None:
                send({"action": "done", "success": False, "message": "no green square on the screen"})
            else:
                send({"action": "key_down", "key": "Right", "message": f"square at x={start_x:.0f}; holding Right"})
        elif phase == 2:
            send({"action": "wait", "ms": 1000, "message": "waiting a second"})
        elif phase == 3:
            x = green_centroid(msg["screenshot"])
            moved = (x - start_x) if x is not None else 0
            verdict = f"the square moved {moved:+.0f} px"
            send({"action": "key_up", "key": "Right", "message": verdict})
        else:
            ok = moved >= 100
            send({"action": "done", "success": ok, "message": verdict + ("" if ok else " (need 100)")})


if __name__ == "__main__":
    main()
