"""Image parts of the canonical format: what they are, how big, and how many tokens a host counts for them.

A canonical image part is ``{"type": "image", "url": ...}``: ``url`` is a ``data:<media type>;base64,...`` URL
(the image itself) or an address the host fetches. Optional keys: ``media_type``, ``width`` and ``height`` (pixels),
``bytes`` (size of the decoded image), ``detail`` (``low``/``high``/``auto``, OpenAI's). The loader fills ``width``,
``height``, ``bytes`` and ``media_type`` of a data URL from the image's own header when they are absent, once at
load (PNG, JPEG, GIF and WebP headers are read here: a few bytes each, no image library needed).

Token estimates per host family (documented with their sources in docs/trajectory-format.md):

- ``openai`` (GPT-4o-class, ``detail`` high or auto): fit within 2048×2048, then shortest side at most 768,
  85 + 170 per 512-pixel tile; ``detail: low`` is 85.
- ``anthropic`` (Claude): fit within a 1568-pixel long edge and 1.2 megapixels (about 1,600 tokens), then
  width × height / 750.
- ``qwen-vl`` (Qwen2-VL / Qwen2.5-VL served by vLLM or SGLang): sides rounded to multiples of 28 within
  3,136 to 12,845,056 pixels, one token per 28×28 patch, + 2 vision start/end tokens.
- ``gemini``: 258 when both sides are at most 384 pixels, else 258 per 768×768 tile.

An image whose size is unknown (an address, not data) counts as 1024×1024. The loader counts images with the
``openai`` family, as it counts text with cl100k; the simulated host counts them the same way.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from typing import Any, TypeGuard

IMAGE = "image"
FAMILIES = ("openai", "anthropic", "qwen-vl", "gemini")
DEFAULT_FAMILY = "openai"
UNKNOWN_SIDE = 1024  # pixels assumed for an image whose size is not known
PLACEHOLDER = "[Image omitted by context cleaning]"  # what computer-use agents leave for a screenshot they dropped


def is_image(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == IMAGE


def has_images(content: Any) -> TypeGuard[list[Any]]:
    return isinstance(content, list) and any(is_image(p) for p in content)


def count_images(content: Any) -> int:
    return sum(1 for p in content if is_image(p)) if isinstance(content, list) else 0


# --------------------------------------------------------------------------------------------- headers


def _png(data: bytes) -> tuple[int, int] | None:
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and len(data) >= 24:
        return struct.unpack(">II", data[16:24])
    return None


def _gif(data: bytes) -> tuple[int, int] | None:
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        return struct.unpack("<HH", data[6:10])
    return None


def _jpeg(data: bytes) -> tuple[int, int] | None:
    if data[:2] != b"\xff\xd8":
        return None
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # markers without a length
            i += 2
            continue
        (length,) = struct.unpack(">H", data[i + 2 : i + 4])
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a start of frame: the size
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return width, height
        i += 2 + length
    return None


def _webp(data: bytes) -> tuple[int, int] | None:
    if data[:4] != b"RIFF" or data[8:12] != b"WEBP" or len(data) < 30:
        return None
    chunk = data[12:16]
    if chunk == b"VP8X":
        return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
    if chunk == b"VP8L":
        bits = int.from_bytes(data[21:25], "little")
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    if chunk == b"VP8 ":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    return None


_SNIFFERS = {"image/png": _png, "image/jpeg": _jpeg, "image/gif": _gif, "image/webp": _webp}


def sniff(data: bytes) -> tuple[str, int, int] | None:
    """(media type, width, height) from an image's first bytes, or None for a format not read here."""
    for media_type, read in _SNIFFERS.items():
        size = read(data)
        if size is not None:
            return media_type, size[0], size[1]
    return None


def decode_data_url(url: str) -> tuple[str, bytes] | None:
    """(media type, bytes) of a base64 ``data:`` URL, or None when ``url`` is not one."""
    if not url.startswith("data:"):
        return None
    head, sep, payload = url.partition(",")
    if not sep or not head.endswith(";base64"):
        return None
    try:
        return head[5:-7], base64.b64decode(payload, validate=False)
    except (binascii.Error, ValueError):
        return None


def describe(part: dict[str, Any]) -> dict[str, Any]:
    """The part with ``media_type``, ``width``, ``height`` and ``bytes`` filled from a data URL where absent."""
    if all(k in part for k in ("width", "height", "bytes")):
        return part
    decoded = decode_data_url(str(part.get("url", "")))
    if decoded is None:
        return part
    media_type, data = decoded
    out = dict(part)
    out.setdefault("bytes", len(data))
    found = sniff(data[:65536])
    if found is not None:
        out.setdefault("media_type", found[0])
        out.setdefault("width", found[1])
        out.setdefault("height", found[2])
    elif media_type:
        out.setdefault("media_type", media_type)
    return out


# --------------------------------------------------------------------------------------------- tokens


def _fit(width: float, height: float, long_edge: float) -> tuple[float, float]:
    scale = min(1.0, long_edge / max(width, height))
    return width * scale, height * scale


def _openai(width: int, height: int, detail: str) -> int:
    if detail == "low":
        return 85
    w, h = _fit(width, height, 2048)
    if min(w, h) > 768:
        scale = 768 / min(w, h)
        w, h = w * scale, h * scale
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def _anthropic(width: int, height: int) -> int:
    w, h = _fit(width, height, 1568)
    if w * h > 1_200_000:  # about 1,600 tokens at most
        scale = math.sqrt(1_200_000 / (w * h))
        w, h = w * scale, h * scale
    return max(1, math.ceil(w * h / 750))


def _qwen_vl(width: int, height: int) -> int:
    factor, low, high = 28, 3136, 12_845_056
    h, w = max(factor, round(height / factor) * factor), max(factor, round(width / factor) * factor)
    if h * w > high:
        beta = math.sqrt(height * width / high)
        h, w = math.floor(height / beta / factor) * factor, math.floor(width / beta / factor) * factor
    elif h * w < low:
        beta = math.sqrt(low / (height * width))
        h, w = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return (h // factor) * (w // factor) + 2


def _gemini(width: int, height: int) -> int:
    if width <= 384 and height <= 384:
        return 258
    return 258 * math.ceil(width / 768) * math.ceil(height / 768)


def _side(value: Any) -> int:
    """A stated side in pixels, or the unknown side's stand-in when it is missing or not a positive integer."""
    return value if isinstance(value, int) and value > 0 else UNKNOWN_SIDE


def image_tokens(part: dict[str, Any], family: str = DEFAULT_FAMILY) -> int:
    """Tokens a host of ``family`` counts for one image part (its stated or sniffed size; 1024×1024 if unknown)."""
    width = _side(part.get("width"))
    height = _side(part.get("height"))
    if family == "openai":
        return _openai(width, height, str(part.get("detail") or "auto"))
    if family == "anthropic":
        return _anthropic(width, height)
    if family == "qwen-vl":
        return _qwen_vl(width, height)
    if family == "gemini":
        return _gemini(width, height)
    raise ValueError(f"unknown image token family {family!r}; expected one of {', '.join(FAMILIES)}")


def content_image_tokens(content: Any, family: str = DEFAULT_FAMILY) -> int:
    return sum(image_tokens(p, family) for p in content if is_image(p)) if isinstance(content, list) else 0


# --------------------------------------------------------------------------------------------- other shapes


def from_wire(part: Any) -> dict[str, Any] | None:
    """A canonical image part from an API's image part (OpenAI chat ``image_url``, Responses ``input_image``,
    Anthropic ``image`` with a base64 or URL source, OTel GenAI ``blob``/``uri`` of image modality), or None."""
    if not isinstance(part, dict):
        return None
    kind = part.get("type")
    url: Any = None
    extra: dict[str, Any] = {}
    if kind == "image_url":
        inner = part.get("image_url")
        url = inner.get("url") if isinstance(inner, dict) else inner
        if isinstance(inner, dict) and inner.get("detail"):
            extra["detail"] = inner["detail"]
    elif kind == "input_image":
        url = part.get("image_url")
        if part.get("detail"):
            extra["detail"] = part["detail"]
    elif kind == IMAGE:
        source = part.get("source")
        if isinstance(source, dict) and source.get("type") == "base64":
            url = f"data:{source.get('media_type') or 'image/png'};base64,{source.get('data', '')}"
        elif isinstance(source, dict) and source.get("type") == "url":
            url = source.get("url")
        else:
            url = part.get("url")
    elif kind in ("blob", "uri") and part.get("modality") == IMAGE:
        if kind == "blob":
            url = f"data:{part.get('mime_type') or 'image/png'};base64,{part.get('content', '')}"
        else:
            url = part.get("uri")
    if not isinstance(url, str) or not url:
        return None
    return describe({"type": IMAGE, "url": url, **extra})


def with_image_sizes(msg: dict[str, Any]) -> dict[str, Any]:
    """A message whose image parts have their sizes filled in (``describe``); the message itself when it has none."""
    content = msg.get("content")
    if not has_images(content):
        return msg
    return {**msg, "content": [describe(p) if is_image(p) else p for p in content]}


def chat_images(msg: dict[str, Any]) -> dict[str, Any]:
    """The message as OpenAI chat sends it: each image part as ``{"type": "image_url", "image_url": {"url"}}`` (with
    ``detail`` when stated); sizes stay on the canonical part, which the chat format has no keys for."""
    content = msg.get("content")
    if not has_images(content):
        return msg
    parts = []
    for p in content:
        if is_image(p):
            inner = {"url": p["url"], **({"detail": p["detail"]} if p.get("detail") else {})}
            parts.append({"type": "image_url", "image_url": inner})
        else:
            parts.append(p)
    return {**msg, "content": parts}


def _placeholder(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "text" and str(part.get("text", "")).strip() == PLACEHOLDER


def _parts(msg: dict[str, Any]) -> list[Any]:
    content = msg.get("content")
    if isinstance(content, list):
        return content
    return [{"type": "text", "text": content}] if isinstance(content, str) and content.strip() == PLACEHOLDER else []


def window(inputs: list[list[dict[str, Any]]], keep: int) -> list[list[dict[str, Any]]]:
    """Each call's input with only its last ``keep`` images; older ones become the text part ``PLACEHOLDER``, as
    computer-use agents clean their context. A placeholder at a place where an earlier call of the same session had an
    image (same message, same part) is that image, so a recording that kept only its latest screenshot per request
    replays with its last ``keep``. Messages are copied where they change, never modified."""
    known: dict[tuple[int, int], dict[str, Any]] = {}
    for messages in inputs:
        for i, msg in enumerate(messages):
            for j, part in enumerate(_parts(msg)):
                if is_image(part):
                    known.setdefault((i, j), part)
    out = []
    for messages in inputs:
        places = [
            (i, j)
            for i, msg in enumerate(messages)
            for j, part in enumerate(_parts(msg))
            if is_image(part) or (_placeholder(part) and (i, j) in known)
        ]
        kept = set(places[len(places) - keep :]) if keep > 0 else set()
        changed: dict[int, list[Any]] = {}
        for i, j in places:
            parts = changed.setdefault(i, list(_parts(messages[i])))
            image = parts[j] if is_image(parts[j]) else known[(i, j)]
            parts[j] = image if (i, j) in kept else {"type": "text", "text": PLACEHOLDER}
        out.append([{**m, "content": changed[i]} if i in changed else m for i, m in enumerate(messages)])
    return out
