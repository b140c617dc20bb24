"""PNG bytes made small: plots have few colours, so a palette PNG (256 colours) is a third of the size."""
from __future__ import annotations

import io

from PIL import Image


def palette_png(raw: bytes) -> bytes:
    """``raw`` (PNG bytes) as a palette PNG, or ``raw`` itself where that is not smaller or where ``raw`` is one
    already (quantized again, the same pixels would come back as other bytes)."""
    image = Image.open(io.BytesIO(raw))
    if image.mode == "P":
        return raw
    buf = io.BytesIO()
    image.convert("RGB").quantize(256).save(buf, "PNG", optimize=True)
    return buf.getvalue() if buf.tell() < len(raw) else raw
