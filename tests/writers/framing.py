"""Plain record framing used only by the writer scripts to build ``expected.json``.

Kept apart from msnb on purpose: the expected values must not come from the
code under test.
"""

import struct


def payloads(path):
    data = open(path, "rb").read()
    pos = 0
    while pos + 12 <= len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        if pos + 16 + n > len(data):
            break
        yield pos, data[pos + 12 : pos + 12 + n]
        pos += 16 + n
