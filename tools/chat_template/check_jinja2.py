#!/usr/bin/env python3
"""Cross-check tests/fixtures/chat_templates/expected.json against Python Jinja2, set up the way
transformers' apply_chat_template sets it up.

expected.json is written by render_reference.mjs with the npm package @huggingface/jinja. This
script renders the same templates and conversations with Jinja2 in the environment of
transformers/utils/chat_template_utils.py (_compile_jinja_template):

    ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                  extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    filters["tojson"] = json.dumps(..., ensure_ascii=False, ...)
    globals["raise_exception"] raises jinja2.exceptions.TemplateError(message)
    globals["strftime_now"]

and render_jinja_template's render(messages=..., tools=None, documents=None,
add_generation_prompt=..., **special_tokens_map). AssistantTracker (the {% generation %} tag) is
left out: none of the fixture templates uses it. It reports every entry where the two engines
disagree (text, or error versus text; error messages themselves are not compared) and exits 1 if
there is one.

Needs Jinja2 >= 3.1 (pip's jinja2, or Debian's python3-jinja2). Usage, from anywhere:
    python3 tools/chat_template/check_jinja2.py
"""
import json
import pathlib
import sys
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "chat_templates"


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


def main():
    conv = json.loads((FIXTURES / "conversations.json").read_text(encoding="utf-8"))
    expected = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))
    env = environment()
    compiled = {}
    for path in sorted(FIXTURES.glob("*.jinja")):
        # Bytes, not read_text(): universal newlines would turn a template's CR LF into LF.
        compiled[path.stem] = env.from_string(path.read_bytes().decode("utf-8"))
    bad = 0
    seen = set()
    for e in expected:
        name, i, agp = e["template"], e["conversation"], e["add_generation_prompt"]
        seen.add((name, i, agp))
        tokens = conv["special_tokens"].get(name) or conv["special_tokens"][name.split("_")[0]]
        kwargs = {k: v for k, v in tokens.items() if v is not None}
        messages = json.loads(json.dumps(conv["conversations"][i]["messages"]))
        try:
            got = {"text": compiled[name].render(messages=messages, tools=None, documents=None,
                                                 add_generation_prompt=agp, **kwargs)}
        except jinja2.exceptions.TemplateError as exc:
            got = {"error": str(exc)}
        want_kind = "text" if "text" in e else "error"
        got_kind = "text" if "text" in got else "error"
        if want_kind != got_kind or (want_kind == "text" and got["text"] != e["text"]):
            bad += 1
            print(f"DIFFER {name} conversation {i} add_generation_prompt={agp}\n"
                  f"  @huggingface/jinja: {json.dumps(e.get('text', e.get('error')), ensure_ascii=False)}\n"
                  f"  jinja2 {jinja2.__version__}:      {json.dumps(got.get('text', got.get('error')), ensure_ascii=False)}")
    want = {(n, i, a) for n in compiled for i in range(len(conv["conversations"])) for a in (True, False)}
    if seen != want:
        print(f"expected.json covers {len(seen)} renderings, the fixtures make {len(want)}: rerun render_reference.mjs")
        bad += 1
    print(f"{len(expected) - bad} agree, {bad} differ (jinja2 {jinja2.__version__})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
