"""A CLIP-BPE-compatible word-level tokenizer for the grammar's words.

vocab.json, as CLIP's: ids 0..255 the byte-level unicode characters
(GPT-2 bytes_to_unicode order), 256..511 the same with "</w>", then every
merge result in merge order, then <|startoftext|>, <|endoftext|> (the two
highest ids, as in CLIP). merges.txt ("#version: 0.2" first) holds, for each
grammar word, the chain of merges that builds it left to right:
  c0 c1 -> c0c1, c0c1 c2 -> c0c1c2, ..., prefix c_last</w> -> word</w>.
Ranks: every merge whose left side is longer than one character comes first
(so a started word always continues its own chain), then the first-pair
merges, topologically ordered so that a word's own first pair outranks any
other first-pair merge occurring inside it. build() checks with its own BPE
that each word becomes exactly one token.
"""
import json
import os


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def _symbols(word):
    return list(word[:-1]) + [word[-1] + "</w>"]


def _bpe(word, ranks):
    sym = _symbols(word)
    while len(sym) > 1:
        pairs = [(ranks.get((sym[i], sym[i + 1]), 1 << 30), i) for i in range(len(sym) - 1)]
        r, _ = min(pairs)
        if r == 1 << 30:
            break
        a, b = next((sym[i], sym[i + 1]) for rr, i in pairs if rr == r)
        out, i = [], 0
        while i < len(sym):
            if i < len(sym) - 1 and sym[i] == a and sym[i + 1] == b:
                out.append(a + b)
                i += 2
            else:
                out.append(sym[i])
                i += 1
        sym = out
    return sym


def build_merges(words):
    later, first = [], []
    for w in words:
        sym = _symbols(w)
        if len(sym) < 2:
            continue
        cur = sym[0]
        for k, s in enumerate(sym[1:]):
            m = (cur, s)
            (first if k == 0 else later).append(m)
            cur = cur + s
    later = list(dict.fromkeys(later))
    first = list(dict.fromkeys(first))
    # Topological order of the first-pair merges.
    firsts = set(first)
    before = {m: set() for m in first}  # m must come before every element of before[m]
    for w in words:
        sym = _symbols(w)
        if len(sym) < 2:
            continue
        own = (sym[0], sym[1])
        for i in range(1, len(sym) - 1):
            p = (sym[i], sym[i + 1])
            if p in firsts and p != own:
                before[own].add(p)
    order, state = [], {}

    def visit(m):
        if state.get(m) == 1:
            raise ValueError("cyclic first-pair merge constraints at %r" % (m,))
        if state.get(m) == 2:
            return
        state[m] = 1
        for n in sorted(before[m]):
            visit(n)
        state[m] = 2
        order.append(m)

    for m in first:
        visit(m)
    order.reverse()
    return later + order


def build(words, out_dir=None):
    """Returns (vocab dict, merges list); writes the tokenizer folder if out_dir."""
    b2u = bytes_to_unicode()
    base = list(b2u.values())
    vocab_list = base + [v + "</w>" for v in base]
    merges = build_merges(words)
    for a, b in merges:
        if a + b not in vocab_list:
            vocab_list.append(a + b)
    vocab_list += ["<|startoftext|>", "<|endoftext|>"]
    vocab = {t: i for i, t in enumerate(vocab_list)}
    assert len(vocab) == len(vocab_list)
    ranks = {m: i for i, m in enumerate(merges)}
    for w in words:
        got = _bpe(w, ranks)
        if got != [w + "</w>"]:
            raise ValueError("word %r tokenizes to %r" % (w, got))
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "vocab.json"), "w", encoding="utf-8") as f:
            json.dump(vocab, f, ensure_ascii=False)
        with open(os.path.join(out_dir, "merges.txt"), "w", encoding="utf-8") as f:
            f.write("#version: 0.2\n")
            for a, b in merges:
                f.write("%s %s\n" % (a, b))
        special = {
            "bos_token": {"content": "<|startoftext|>", "lstrip": False, "normalized": True,
                          "rstrip": False, "single_word": False},
            "eos_token": {"content": "<|endoftext|>", "lstrip": False, "normalized": True,
                          "rstrip": False, "single_word": False},
            "pad_token": "<|endoftext|>",
            "unk_token": {"content": "<|endoftext|>", "lstrip": False, "normalized": True,
                          "rstrip": False, "single_word": False},
        }
        with open(os.path.join(out_dir, "special_tokens_map.json"), "w") as f:
            json.dump(special, f, indent=2)
        cfg = {
            "add_prefix_space": False,
            "bos_token": "<|startoftext|>",
            "clean_up_tokenization_spaces": True,
            "do_lower_case": True,
            "eos_token": "<|endoftext|>",
            "errors": "replace",
            "model_max_length": 77,
            "pad_token": "<|endoftext|>",
            "tokenizer_class": "CLIPTokenizer",
            "unk_token": "<|endoftext|>",
        }
        with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
    return vocab, merges


def verify_with_transformers(tok_dir, words, captions):
    """CLIPTokenizer(vocab, merges) and from_pretrained: every word one token,
    ids as in vocab.json. Returns the loaded tokenizer."""
    from transformers import CLIPTokenizer
    with open(os.path.join(tok_dir, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    t1 = CLIPTokenizer(os.path.join(tok_dir, "vocab.json"), os.path.join(tok_dir, "merges.txt"))
    t2 = CLIPTokenizer.from_pretrained(tok_dir)
    for t in (t1, t2):
        for w in words:
            ids = t(w)["input_ids"]
            want = [vocab["<|startoftext|>"], vocab[w + "</w>"], vocab["<|endoftext|>"]]
            assert ids == want, (w, ids, want)
        for c in captions:
            ids = t(c, padding="max_length", max_length=77, truncation=True)["input_ids"]
            want = [vocab["<|startoftext|>"]] + [vocab[w + "</w>"] for w in c.split()] + [vocab["<|endoftext|>"]]
            want += [vocab["<|endoftext|>"]] * (77 - len(want))
            assert ids == want, (c, ids)
    return t2
