#!/usr/bin/python3
"""Render a terminal screen captured by tmux into a PNG (the README's picture of the chat).

Input: the output of `tmux capture-pane -p -e -N` (UTF-8 text with SGR escape sequences: bold,
dim, italic, underline, reverse, the 16 ANSI colours, 256 colours and true colour; -N keeps the
trailing spaces, so bars keep their colour to the right edge). Output: a PNG of the cells in
DejaVu Sans Mono on a dark background, with a block cursor where --cursor says. A wide
character (East Asian width W or F) takes two cells; the box and block characters the chat draws
(│ ─ █ ▓ ▒ ░) are painted as rectangles filling their cell, so a column of them joins up as it
does in a terminal. A character the font lacks (CJK, emoji) shows as the font's missing-glyph
box.

Debian packages: python3-pil, fonts-dejavu-core (run with Debian's /usr/bin/python3).

docs/chat.png is made by tools/chat_screenshot.sh (the chat at 130x32 resumed from a saved chat
whose last reply is scripted markdown, captured and rendered by this script):

    bash tools/chat_screenshot.sh [OUT.png]
"""

import argparse
import re
import sys
import unicodedata

from PIL import Image, ImageDraw, ImageFont

FONT_DIR = "/usr/share/fonts/truetype/dejavu/"
FONTS = {  # (bold, italic) -> file
    (False, False): "DejaVuSansMono.ttf",
    (True, False): "DejaVuSansMono-Bold.ttf",
    (False, True): "DejaVuSansMono-Oblique.ttf",
    (True, True): "DejaVuSansMono-BoldOblique.ttf",
}

BACKGROUND = (30, 32, 38)
FOREGROUND = (212, 214, 218)
# The 16 ANSI colours (a dark theme in the manner of Tango).
ANSI = [
    (46, 52, 54), (204, 0, 0), (78, 154, 6), (196, 160, 0),
    (52, 101, 164), (117, 80, 123), (6, 152, 154), (211, 215, 207),
    (85, 87, 83), (239, 41, 41), (138, 226, 52), (252, 233, 79),
    (114, 159, 207), (173, 127, 168), (52, 226, 226), (238, 238, 236),
]

SGR = re.compile(r"\x1b\[([0-9;:]*)m")
OTHER_ESCAPE = re.compile(r"\x1b(\[[0-9;?]*[A-Za-z]|\][^\x07]*\x07|.)")


def xterm256(n):
    """The RGB of xterm colour n (0-255)."""
    if n < 16:
        return ANSI[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return steps[n // 36], steps[(n // 6) % 6], steps[n % 6]
    v = 8 + 10 * (n - 232)
    return v, v, v


class Style:
    """The SGR state: colours (None = the default), attributes."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.fg = self.bg = None
        self.bold = self.dim = self.italic = self.underline = self.reverse = False

    def copy(self):
        s = Style()
        s.__dict__.update(self.__dict__)
        return s

    def apply(self, params):
        p = [int(x) if x else 0 for x in re.split("[;:]", params)] if params else [0]
        i = 0
        while i < len(p):
            v = p[i]
            if v == 0:
                self.reset()
            elif v == 1:
                self.bold = True
            elif v == 2:
                self.dim = True
            elif v == 3:
                self.italic = True
            elif v == 4:
                self.underline = True
            elif v == 7:
                self.reverse = True
            elif v == 22:
                self.bold = self.dim = False
            elif v == 23:
                self.italic = False
            elif v == 24:
                self.underline = False
            elif v == 27:
                self.reverse = False
            elif 30 <= v <= 37:
                self.fg = ANSI[v - 30]
            elif 90 <= v <= 97:
                self.fg = ANSI[v - 90 + 8]
            elif v == 39:
                self.fg = None
            elif 40 <= v <= 47:
                self.bg = ANSI[v - 40]
            elif 100 <= v <= 107:
                self.bg = ANSI[v - 100 + 8]
            elif v == 49:
                self.bg = None
            elif v in (38, 48) and i + 1 < len(p):
                if p[i + 1] == 5 and i + 2 < len(p):
                    colour = xterm256(p[i + 2])
                    i += 2
                elif p[i + 1] == 2 and i + 4 < len(p):
                    colour = tuple(p[i + 2:i + 5])
                    i += 4
                else:
                    colour = None
                if v == 38:
                    self.fg = colour
                else:
                    self.bg = colour
            i += 1

    def colours(self):
        """(foreground, background) as drawn: reverse and dim applied."""
        fg = self.fg or FOREGROUND
        bg = self.bg or BACKGROUND
        if self.bold and self.fg in ANSI[:8]:
            fg = ANSI[ANSI.index(self.fg) + 8]  # bold brightens, as most terminals do
        if self.reverse:
            fg, bg = bg, fg
        if self.dim:
            fg = blend(fg, bg, 0.5)
        return fg, bg


def blend(a, b, t):
    """a weighted (1 - t), b weighted t."""
    return tuple(round(x * (1 - t) + y * t) for x, y in zip(a, b))


def cell_width(ch):
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def parse(text):
    """Rows of cells (char, Style); a wide character's second cell is (None, style)."""
    rows = []
    style = Style()
    for line in text.split("\n"):
        cells = []
        pos = 0
        while pos < len(line):
            if line[pos] == "\x1b":
                m = SGR.match(line, pos)
                if m:
                    style.apply(m.group(1))
                    pos = m.end()
                    continue
                m = OTHER_ESCAPE.match(line, pos)
                pos = m.end() if m else pos + 1
                continue
            ch = line[pos]
            pos += 1
            w = cell_width(ch)
            if w == 0:
                if cells and cells[-1][0]:
                    cells[-1] = (cells[-1][0] + ch, cells[-1][1])
                continue
            if ord(ch) < 32:
                continue
            cells.append((ch, style.copy()))
            if w == 2:
                cells.append((None, style.copy()))
        rows.append(cells)
    while rows and not rows[-1]:
        rows.pop()
    return rows


# Shades: the share of the cell's foreground in its colour.
SHADES = {"░": 0.25, "▒": 0.5, "▓": 0.75, "█": 1.0}


def render(rows, columns, font_size, padding, cursor=None):
    fonts = {k: ImageFont.truetype(FONT_DIR + f, font_size) for k, f in FONTS.items()}
    regular = fonts[(False, False)]
    ascent, descent = regular.getmetrics()
    cw = round(regular.getlength("M"))
    ch = ascent + descent + 2
    columns = max(columns, max((len(r) for r in rows), default=0))
    image = Image.new(
        "RGB", (columns * cw + 2 * padding, len(rows) * ch + 2 * padding), BACKGROUND)
    draw = ImageDraw.Draw(image)
    for y, cells in enumerate(rows):
        top = padding + y * ch
        # Backgrounds first (a row's default background runs to the right edge).
        for x, (_, style) in enumerate(cells):
            _, bg = style.colours()
            if bg != BACKGROUND:
                left = padding + x * cw
                draw.rectangle([left, top, left + cw - 1, top + ch - 1], fill=bg)
        for x, (text, style) in enumerate(cells):
            if not text or text == " ":
                continue
            fg, bg = style.colours()
            left = padding + x * cw
            if text in SHADES:
                draw.rectangle([left, top, left + cw - 1, top + ch - 1],
                               fill=blend(bg, fg, SHADES[text]))
            elif text == "│":
                mid = left + cw // 2
                draw.rectangle([mid, top, mid, top + ch - 1], fill=fg)
            elif text == "─":
                mid = top + ch // 2
                draw.rectangle([left, mid, left + cw - 1, mid], fill=fg)
            else:
                font = fonts[(style.bold, style.italic)]
                draw.text((left, top + 1), text, font=font, fill=fg)
            if style.underline:
                draw.line([left, top + ascent + 2, left + cw - 1, top + ascent + 2], fill=fg)
    if cursor:
        x, y = cursor
        left, top = padding + x * cw, padding + y * ch
        draw.rectangle([left, top, left + cw - 1, top + ch - 1], fill=FOREGROUND)
        if y < len(rows) and x < len(rows[y]) and rows[y][x][0] not in (None, " "):
            draw.text((left, top + 1), rows[y][x][0], font=regular, fill=BACKGROUND)
    return image


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("capture", help="a `tmux capture-pane -p -e` capture ('-': stdin)")
    ap.add_argument("png", help="the PNG to write")
    ap.add_argument("--columns", type=int, default=0,
                    help="the terminal's width (default: the widest row)")
    ap.add_argument("--font-size", type=int, default=15,
                    help="points; 15 gives whole-pixel 9-pixel cells")
    ap.add_argument("--cursor", default="",
                    help="X,Y: the cursor's cell (tmux display -p '#{cursor_x},#{cursor_y}')")
    ap.add_argument("--padding", type=int, default=10)
    ap.add_argument("--colours", type=int, default=64,
                    help="palette size of the PNG (smaller files; 0 keeps full RGB)")
    a = ap.parse_args()
    data = sys.stdin.buffer.read() if a.capture == "-" else open(a.capture, "rb").read()
    cursor = tuple(int(v) for v in a.cursor.split(",")) if a.cursor else None
    image = render(parse(data.decode("utf-8", "replace")), a.columns, a.font_size, a.padding,
                   cursor)
    if a.colours:
        image = image.quantize(colors=a.colours, method=Image.Quantize.MEDIANCUT, dither=0)
    image.save(a.png, optimize=True)


if __name__ == "__main__":
    main()
