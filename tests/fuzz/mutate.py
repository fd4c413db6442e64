"""Hypothesis strategies that damage a valid file the way users' files get damaged."""

from __future__ import annotations

from hypothesis import strategies as st

# bytes a damaged text file tends to hold: separators, digits, signs, letters, invalid UTF-8, NUL, BOM pieces
NOISE = b" \t\n\r#.-+eE0123456789abcQ0nainf\xff\xfe\x00\xef\xbb\xbf\xc3\xa9"


@st.composite
def mutated(draw, good: bytes, max_ops: int = 4) -> bytes:
    """``good`` after 0..max_ops edits: flip, insert, delete, duplicate or truncate."""
    data = bytearray(good)
    for _ in range(draw(st.integers(0, max_ops))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "dup_line", "truncate", "swap_lines"]))
        n = len(data)
        if op == "flip" and n:
            i = draw(st.integers(0, n - 1))
            data[i] = draw(st.sampled_from(NOISE))
        elif op == "insert":
            i = draw(st.integers(0, n))
            data[i:i] = draw(st.binary(min_size=1, max_size=6).map(lambda b: bytes(NOISE[x % len(NOISE)] for x in b)))
        elif op == "delete" and n:
            i = draw(st.integers(0, n - 1))
            data[i : i + draw(st.integers(1, 8))] = b""
        elif op == "truncate" and n:
            data = data[: draw(st.integers(0, n))]
        else:
            lines = bytes(data).split(b"\n")
            if len(lines) > 1:
                i = draw(st.integers(0, len(lines) - 1))
                j = draw(st.integers(0, len(lines) - 1))
                if op == "dup_line":
                    lines.insert(j, lines[i])
                else:
                    lines[i], lines[j] = lines[j], lines[i]
                data = bytearray(b"\n".join(lines))
    return bytes(data)
