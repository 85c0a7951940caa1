# arm64-vm.sh: writes a gzip newc cpio archive (an initrd) of the files given as NAME=SOURCE
# (all mode 0755) plus the directories dev, proc, m, newroot; no cpio binary needed.
import gzip, os, sys
def entry(out, name, data, mode, ino):
    hdr = "070701" + "".join("%08X" % v for v in [ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name) + 1, 0])
    out.write(hdr.encode() + name.encode() + b"\0")
    out.write(b"\0" * ((4 - (110 + len(name) + 1) % 4) % 4))
    out.write(data)
    out.write(b"\0" * ((4 - len(data) % 4) % 4))
with gzip.open(sys.argv[1], "wb") as out:
    ino = 1
    for d in ["dev", "proc", "m", "newroot"]:
        entry(out, d, b"", 0o040755, ino); ino += 1
    for spec in sys.argv[2:]:
        name, src = spec.split("=", 1)
        entry(out, name, open(src, "rb").read(), 0o100755, ino); ino += 1
    entry(out, "TRAILER!!!", b"", 0, 0)
