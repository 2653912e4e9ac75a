#!/usr/bin/env python3
"""Writes tests/data/tokenizer_edge_golden.json: transformers' CLIPTokenizer ids for edge-case prompts.

The ids come from the real slow CLIPTokenizer (transformers 4.45.2, `regex`, Python 3.11 whose unicodedata
is Unicode 14.0, ftfy NOT installed), on the tiny vocabulary of text/data/tiny-tokenizer/ (a copy of
../shared/refdata/tiny-sd-a/tokenizer/; every byte has a token, so any text is encodable) under three
special-token layouts:
  tiny        the folder as is (tokenizer_config.json with added_tokens_decoder, SD 1.x style);
  legacy_pad  no tokenizer_config.json, special_tokens_map.json with pad_token "!" (SD 2.x's pad), so "!"
              is an added token split out of the text;
  flags       added_tokens_decoder entries with lstrip/rstrip/single_word, extra added tokens,
              left padding and left truncation; special_tokens_map.json present but ignored.
Each prompt gets its untruncated ids and tokenizer(p, padding="max_length", max_length=L, truncation=True)
for L in MAX_LENGTHS.

Offline tool, re-run it to regenerate:
  python3 -m venv /tmp/venv && /tmp/venv/bin/pip install transformers==4.45.2   # no ftfy, no torch
  /tmp/venv/bin/python scripts/refdata/make_tokenizer_edge_golden.py text/data/tiny-tokenizer \
      tests/data/tokenizer_edge_golden.json
"""
import json
import os
import random
import shutil
import sys
import tempfile
import unicodedata

import regex
import transformers
from transformers import CLIPTokenizer

MAX_LENGTHS = [16]  # 77 is covered by the tiny-sd-a and real-vocabulary goldens

VARIANTS = {
    "tiny": None,  # the folder's own configs
    "legacy_pad": {
        "special_tokens_map.json": {"bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>",
                                    "unk_token": "<|endoftext|>", "pad_token": "!"},
    },
    "flags": {
        "tokenizer_config.json": {
            "added_tokens_decoder": {
                "998": {"content": "<|startoftext|>", "lstrip": False, "normalized": True, "rstrip": False,
                        "single_word": True, "special": True},
                "999": {"content": "<|endoftext|>", "lstrip": True, "normalized": True, "rstrip": True,
                        "single_word": False, "special": True},
                "5": {"content": "cat", "lstrip": False, "normalized": False, "rstrip": False,
                      "single_word": True, "special": False},
                "12": {"content": "-", "lstrip": True, "normalized": False, "rstrip": False,
                       "single_word": False, "special": False},
            },
            "bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>", "pad_token": "!",
            "unk_token": "<|endoftext|>", "padding_side": "left", "truncation_side": "left",
            "tokenizer_class": "CLIPTokenizer", "model_max_length": 77,
        },
        "special_tokens_map.json": {"pad_token": "<|startoftext|>"},
    },
}

PROMPTS = [
    "", " ", "   \t\n  ", "a photograph of an astronaut riding a horse",
    "A CAT's 3 toys, on   the mat!! (oil painting) café",
    "It's 3:30pm -- don't you've we'll they're I'm he'd", "IT'S DON'T WE'LL", "'s's 'S", "rock'n'roll",
    "UPPER lower MiXeD 12345 67.89", "8k 4K uhd, 1920x1080", "((masterpiece)), [best quality], {detailed}",
    "photo:1.2 | cat::0.5", "e-mail me@x.com #tag $5 50% a&b", "tab\tnew\nline\rcr", "a\x00b\x07c\x1bd\x7f",
    "café", "cafe\u0301", "e\u0301\u0301", "naïve résumé Ångström \u212b \u212a",
    "ΟΔΟΣ ΑΣ Σ ΣΑ", "İstanbul ISTANBUL ıi", "straße STRASSE ẞ", "ﬁne ﬀ ŉ ǅ ǈ ᾈ", "α\u0345 a\u0345b !\u0345!",
    "Привет, МИР!", "Ελληνικά", "עברית", "العربية ١٢٣", "हिन्दी", "ไทย", "日本語のテキスト", "中文字符", "한국어 문장",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ℌ", "ｆｕｌｌ ｗｉｄｔｈ １２３", "① ½ ² Ⅻ ⅻ", "“quoted” ‘single’ – — … ™ ©",
    "😀 😀😀 🇺🇸 👩‍👩‍👧 ✨", "\U0001F6DC wireless (Unicode 15)", "kawi \U00011F04 (Unicode 15)",
    "cjk-ext \U0002B739 (Unicode 15)", "\u200b zero\u200dwidth \ufeff bom \u00ad soft \u2060",
    "nbsp\u00a0x ideographic\u3000x line\u2028sep para\u2029sep nel\x85x",
    "private \ue000 \U000f0000 nonchar \ufffe unassigned \u0378 replacement \ufffd",
    "<|startoftext|>", "<|endoftext|>", "a <|endoftext|> b", "x<|endoftext|>y", "!!<|endoftext|>",
    "<|ENDOFTEXT|> <|StartOfText|>", "<|endo\u200bftext|>", "<|endoftext|><|endoftext|>", "<|start<|endoftext|>",
    "hello!! there! !", "a cat-dog - cat cat! catcat", "an ai anai an", "x" * 40,
    "a highly detailed matte painting of a quiet mountain village at sunrise, mist rolling over the valley",
    " ".join(["a"] * 100),
]


def random_prompts(n, seed):
    pieces = list("abcXYZ sS'tT.,!?-_()[]{}<>|:;\"0123456789 \t\n") + [
        "'s", "'RE", "<|endoftext|>", "<|startoftext|>", "<|ENDOFTEXT|>", "Σ", "ΣΑΣ", "İ", "ß", "ﬁ", "\u0345",
        "e\u0301", "\u0301", "Å", "\u212b", "café", "日本", "한국어", "\u3000", "\u00a0", "\u2028", "\u200b",
        "\x00", "\x85", "\ufffd", "\U0001F600", "\U0001F6DC", "①", "½", "cat", "an", "ai", "-", "!",
        "masterpiece", "8k",
    ]
    rnd = random.Random(seed)
    return ["".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 24))) for _ in range(n)]


def main():
    src, out = sys.argv[1], sys.argv[2]
    prompts = PROMPTS + random_prompts(40, 20261122)
    result = {
        "source": {
            "transformers": transformers.__version__, "regex": regex.__version__,
            "python_unicodedata": unicodedata.unidata_version, "ftfy": "not installed",
            "vocabulary": "text/data/tiny-tokenizer (= ../shared/refdata/tiny-sd-a/tokenizer)",
            "made_by": "scripts/refdata/make_tokenizer_edge_golden.py",
        },
        "max_lengths": MAX_LENGTHS,
        "prompts": prompts,
        "variants": {},
    }
    for name, files in VARIANTS.items():
        with tempfile.TemporaryDirectory() as d:
            for f in ("vocab.json", "merges.txt"):
                shutil.copy(os.path.join(src, f), d)
            texts = {}
            if files is None:
                for f in ("special_tokens_map.json", "tokenizer_config.json"):
                    if os.path.exists(os.path.join(src, f)):
                        shutil.copy(os.path.join(src, f), d)
            else:
                for f, content in files.items():
                    texts[f] = json.dumps(content, indent=1)
                    with open(os.path.join(d, f), "w", encoding="utf-8") as fh:
                        fh.write(texts[f])
            tok = CLIPTokenizer.from_pretrained(d)
            v = {"files": texts, "untruncated": [], "padded": {str(n): [] for n in MAX_LENGTHS}}
            for p in prompts:
                v["untruncated"].append(tok(p)["input_ids"])
                for n in MAX_LENGTHS:
                    v["padded"][str(n)].append(
                        tok(p, padding="max_length", max_length=n, truncation=True)["input_ids"])
            result["variants"][name] = v
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=True, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
