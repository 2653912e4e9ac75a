#!/usr/bin/env python3
"""Copies the tokenizer ground truth the tests need from ../shared/refdata into tests/data/ as JSON.

Offline tool: `python3 -m venv /tmp/venv && /tmp/venv/bin/pip install h5py`, then
  /tmp/venv/bin/python scripts/refdata/extract_tokenizer_golden.py ../shared/refdata tests/data
Writes tiny_tokenizer_golden.json (tiny-sd-a/golden.h5: prompts, padded ids, untruncated ids) and
clip_tokens_golden.json (clip-tokenizer/tokens.h5: transformers' ids on the real ViT-L/14 vocabulary).
The vocabularies themselves are not copied: the tiny one lives in pipeline/data/tiny-tokenizer/, the
real one is read from ../shared by the tests.
"""
import json
import os
import sys

import h5py


def dump(path, prompts, ids, untruncated, attrs):
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"source": attrs, "prompts": prompts, "input_ids": ids, "untruncated": untruncated},
                  f, ensure_ascii=False)
        f.write("\n")


def main():
    ref, out = sys.argv[1], sys.argv[2]
    with h5py.File(os.path.join(ref, "tiny-sd-a", "golden.h5"), "r") as g:
        t = g["tokenizer"]
        prompts = [p.decode("utf-8") for p in t["prompts"][()]]
        dump(os.path.join(out, "tiny_tokenizer_golden.json"), prompts,
             t["input_ids"][()].tolist(),
             [t[f"ids_untruncated_{i}"][()].tolist() for i in range(len(prompts))],
             {k: str(v) for k, v in g.attrs.items() if k.startswith("version_transformers")})
    with h5py.File(os.path.join(ref, "clip-tokenizer", "tokens.h5"), "r") as g:
        prompts = [p.decode("utf-8") for p in g["prompts"][()]]
        dump(os.path.join(out, "clip_tokens_golden.json"), prompts, g["input_ids"][()].tolist(),
             [g[f"ids_untruncated_{i}"][()].tolist() for i in range(len(prompts))],
             {k: str(v) for k, v in g.attrs.items()})


if __name__ == "__main__":
    main()
