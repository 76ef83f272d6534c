#!/usr/bin/env python3
"""Goldens for rlx-text's chat templates: each template rendered by Python's jinja2 the way
transformers' apply_chat_template does (trim_blocks, lstrip_blocks, raise_exception,
bos_token/eos_token, add_generation_prompt).

Templates: SmolLM2-135M-Instruct's (read from the GGUF fetched by `tools/fetch.sh smollm2`) and a
few from llama.cpp's models/templates (`tools/fetch.sh llama-cpp-src`). Writes
crates/text/rlx-text/tests/fixtures/chat_templates.json. Run from the repo root:
    python3 tools/refgen/gen_chat_templates.py
Requires jinja2 and gguf (tools/refgen/requirements-text.txt).
"""
import json
import os

import gguf
import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

CACHE = os.environ.get("RLX_CACHE", os.path.expanduser("~/.cache/rlx"))
TEMPLATES = os.path.join(CACHE, "llama-cpp-src/vendor/llama.cpp/models/templates")
OUT = os.path.join(os.path.dirname(__file__), "../../crates/text/rlx-text/tests/fixtures/chat_templates.json")

# name in llama.cpp's models/templates -> (bos, eos)
LLAMA_CPP = {
    "Qwen-Qwen2.5-7B-Instruct": ("", "<|im_end|>"),
    "microsoft-Phi-3.5-mini-instruct": ("<s>", "<|endoftext|>"),
    "google-gemma-2-2b-it": ("<bos>", "<eos>"),
    "mistralai-Mistral-Nemo-Instruct-2407": ("<s>", "</s>"),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
}

CONVERSATIONS = {
    "user_only": [{"role": "user", "content": "What is the capital of France?"}],
    "multi_turn": [
        {"role": "user", "content": "Hi there!"},
        {"role": "assistant", "content": "Hello! How can I help you today?"},
        {"role": "user", "content": "  Tell me a joke.  "},
    ],
    "with_system": [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "Name three primes."},
    ],
}


def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


def render(template, messages, add_generation_prompt, bos, eos):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(
        messages=messages, add_generation_prompt=add_generation_prompt, bos_token=bos, eos_token=eos)


def main():
    templates = []
    smol = os.path.join(CACHE, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    r = gguf.GGUFReader(smol)
    templates.append(("SmolLM2-135M-Instruct", r.fields["tokenizer.chat_template"].contents(), "", "<|im_end|>"))
    for name, (bos, eos) in LLAMA_CPP.items():
        with open(os.path.join(TEMPLATES, name + ".jinja"), encoding="utf-8") as f:
            templates.append((name, f.read(), bos, eos))
    cases = []
    for name, tmpl, bos, eos in templates:
        for conv_name, msgs in CONVERSATIONS.items():
            for agp in (True, False):
                try:
                    out = render(tmpl, msgs, agp, bos, eos)
                    err = None
                except jinja2.exceptions.TemplateError as e:
                    out, err = None, str(e)
                cases.append(dict(template=name, conversation=conv_name, add_generation_prompt=agp,
                                  expected=out, error=err))
    fixture = dict(
        templates={name: dict(source=tmpl, bos=bos, eos=eos) for name, tmpl, bos, eos in templates},
        conversations=CONVERSATIONS,
        cases=cases,
    )
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(fixture, f, indent=1, ensure_ascii=False)
        f.write("\n")
    n_err = sum(c["error"] is not None for c in cases)
    print("wrote", os.path.normpath(OUT), len(cases), "cases,", n_err, "raise an error")


if __name__ == "__main__":
    main()
