#!/usr/bin/python3
"""encoder_baseline.py: the PyTorch side of bench/bench_encoder (run by it).

  encoder_baseline.py --make-weights PATH   write ViT-B/32-shaped random weights
                                            (OpenAI naming, F32 safetensors)
  encoder_baseline.py --make-weights-f16 PATH   the same weights as --make-weights
                                            (same seed), stored F16
  encoder_baseline.py --make-weights-rn50 PATH   RN50-shaped random weights (OpenAI
                                            naming, F32; BatchNorm statistics
                                            calibrated on random images)
  encoder_baseline.py --measure-rn50 PATH [--batch 32] [--threads 2] [--runs 2]
      loads PATH into scripts/clip_torch.py's ModifiedResNet CLIP (fp32, eval, NCHW
      as OpenAI's clip runs it), prints torch_rn50_image_per_s=<images/s> (best of
      --runs after a warm-up) and torch_rn50_rss_mb=<peak RSS>
  encoder_baseline.py --serve-rn50 PATH [--batch 32] [--threads 2]
      the same model, timed one batch per "run" line read from stdin (answers
      "t=<seconds>"; "ready" after the warm-up): bench_encoder interleaves these
      with its own batches; torch_rss_mb=<peak RSS> at the end
  encoder_baseline.py --serve-vit PATH [--vocab BPE_GZ] [--batch 32] [--threads 2]
      the ViT-B/32 CLIP, driven line by line as --serve-rn50: "run" times one image
      batch, "text" one short query (tokenize + encode_text; needs --vocab), each
      answered "t=<seconds>"; "ready" after the warm-ups
  encoder_baseline.py --measure PATH [--vocab BPE_GZ] [--batch 32] [--threads 2]
      loads PATH into scripts/clip_torch.py's CLIP (fp32, torch.set_num_threads),
      prints machine-readable lines:
        torch_image_per_s=<images/s at the batch size>   (best of 3 after a warm-up)
        torch_text_ms=<ms for one short query: tokenize + encode_text>  (median)
        torch_rss_mb=<peak RSS>

The tokenizer here is a compact re-implementation of OpenAI CLIP's simple_tokenizer
(byte-level BPE over the same merges; no ftfy, ASCII-class regex) so the latency
includes tokenization as clipdb's does. Only for benchmarking.
"""
import argparse
import gzip
import html
import os
import re
import resource
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
import clip_torch  # noqa: E402
from train_bpe import bpe_word, bytes_to_unicode  # noqa: E402  (CLIP's byte map and BPE)


class Tokenizer:
    def __init__(self, path):
        merges = gzip.open(path).read().decode("utf-8").split("\n")[1:49152 - 256 - 2 + 1]
        merges = [tuple(m.split()) for m in merges]
        self.byte_encoder = bytes_to_unicode()
        vocab = list(self.byte_encoder.values())
        vocab = vocab + [v + "</w>" for v in vocab] + ["".join(m) for m in merges]
        vocab += ["<|startoftext|>", "<|endoftext|>"]
        self.encoder = {v: i for i, v in enumerate(vocab)}
        self.ranks = {m: i for i, m in enumerate(merges)}
        self.pat = re.compile(r"""<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|"""
                              r"""[^\W\d_]+|\d|[^\s\w]+""", re.IGNORECASE)

    def tokenize(self, text, ctx=77):
        text = re.sub(r"\s+", " ", html.unescape(html.unescape(text))).strip().lower()
        ids = [self.encoder["<|startoftext|>"]]
        for tok in self.pat.findall(text):
            tok = "".join(self.byte_encoder[b] for b in tok.encode("utf-8"))
            ids += [self.encoder[t] for t in bpe_word(tok, self.ranks)]
        ids = ids[:ctx - 1] + [self.encoder["<|endoftext|>"]]
        out = torch.zeros(1, ctx, dtype=torch.long)
        out[0, :len(ids)] = torch.tensor(ids)
        return out


def make_weights(path, dtype=torch.float32):
    torch.manual_seed(0)
    m = clip_torch.CLIP()  # ViT-B/32 shapes: 88M visual + 63M text parameters
    sd = {k: v.detach().to(dtype) if v.is_floating_point() else v.detach()
          for k, v in m.state_dict().items()}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    clip_torch.save_safetensors(sd, tmp, {"description": "random ViT-B/32-shaped CLIP (bench)"})
    os.replace(tmp, path)


RN50 = dict(embed_dim=1024, image_size=224, vision_width=64, vision_layers=(3, 4, 6, 3),
            text_width=512, text_layers=12)


def make_weights_rn50(path):
    """RN50 shapes (102.01M parameters). OpenAI's init zeroes every bn3 gain (the
    residual branches would then add nothing); here they are 0.5 and the running
    statistics are the batch statistics of random images, so activations have the
    scale of a trained network's (this matters for the precision figures of
    docs/models.md, not for speed)."""
    torch.manual_seed(0)
    m = clip_torch.CLIP(**RN50)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in m.visual.named_parameters():
            if name.endswith("bn3.weight"):
                p.fill_(0.5)
        for mod in m.visual.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.reset_running_stats()
                mod.momentum = None
        m.visual.train()
        for _ in range(2):
            m.visual(torch.randn(4, 3, 224, 224, generator=g))
        m.visual.eval()
    sd = {k: v.detach() for k, v in m.state_dict().items()}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    clip_torch.save_safetensors(sd, tmp, {"description": "random RN50-shaped CLIP (bench)"})
    os.replace(tmp, path)


def model_and_batch(args, path, **shape):
    """With args.threads threads: the CLIP model of these shapes (ViT-B/32 by default)
    with the weights at path, and a seeded random image batch of args.batch."""
    torch.set_num_threads(args.threads)
    m = clip_torch.CLIP(**shape).eval()
    m.load_state_dict(clip_torch.load_safetensors(path))
    torch.manual_seed(1)
    return m, torch.randn(args.batch, 3, 224, 224)


def best_image_seconds(m, x, runs):
    """The best of runs timed m.encode_image(x), after one untimed warm-up."""
    with torch.inference_mode():
        m.encode_image(x)
        best = float("inf")
        for _ in range(runs):
            t = time.perf_counter()
            m.encode_image(x)
            best = min(best, time.perf_counter() - t)
    return best


def measure_rn50(args):
    m, x = model_and_batch(args, args.measure_rn50, **RN50)
    print(f"torch_rn50_image_per_s={args.batch / best_image_seconds(m, x, args.runs):.3f}",
          flush=True)
    print(f"torch_rn50_rss_mb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}",
          flush=True)


def serve_rn50(args):
    """Interleaved timing: after a warm-up, one timed batch per "run" line on stdin,
    answered with "t=<seconds>", so that bench_encoder alternates clipdb and PyTorch
    batches and both see the same machine load."""
    m, x = model_and_batch(args, args.serve_rn50, **RN50)
    with torch.inference_mode():
        m.encode_image(x)
    serve_loop({"run": lambda: m.encode_image(x)})


def serve_loop(steps):
    """After the warm-ups (the caller's): "ready", then one timed step per line of stdin
    (steps: name -> function; any other line ends it), each answered "t=<seconds>";
    torch_rss_mb=<peak RSS> at the end. Also bench/siglip_baseline.py's."""
    with torch.inference_mode():
        print("ready", flush=True)
        for line in sys.stdin:
            step = steps.get(line.strip())
            if step is None:
                break
            t = time.perf_counter()
            step()
            print(f"t={time.perf_counter() - t:.6f}", flush=True)
    print(f"torch_rss_mb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}",
          flush=True)


def serve_vit(args):
    """Interleaved timing of the ViT model (see serve_rn50)."""
    m, x = model_and_batch(args, args.serve_vit)
    tok = Tokenizer(args.vocab) if args.vocab and os.path.exists(args.vocab) else None
    steps = {"run": lambda: m.encode_image(x)}
    if tok:
        steps["text"] = lambda: m.encode_text(tok.tokenize(args.text))
    with torch.inference_mode():
        for step in [steps["run"]] + [steps.get("text")] * 3:
            if step:
                step()
    serve_loop(steps)


def measure(args):
    m, x = model_and_batch(args, args.measure)
    print(f"torch_image_per_s={args.batch / best_image_seconds(m, x, args.runs):.3f}", flush=True)
    if args.vocab and os.path.exists(args.vocab):
        tok = Tokenizer(args.vocab)
        with torch.inference_mode():
            for _ in range(3):
                m.encode_text(tok.tokenize(args.text))
            ts = []
            for _ in range(args.text_runs):
                t = time.perf_counter()
                m.encode_text(tok.tokenize(args.text))
                ts.append(time.perf_counter() - t)
        ts.sort()
        print(f"torch_text_ms={1000 * ts[len(ts) // 2]:.3f}", flush=True)
    print(f"torch_rss_mb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}",
          flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--make-weights")
    ap.add_argument("--make-weights-f16")
    ap.add_argument("--measure")
    ap.add_argument("--make-weights-rn50")
    ap.add_argument("--measure-rn50")
    ap.add_argument("--serve-rn50")
    ap.add_argument("--serve-vit")
    ap.add_argument("--vocab")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--text-runs", type=int, default=15)
    ap.add_argument("--text", default="a dog on a beach")
    args = ap.parse_args()
    if args.make_weights:
        make_weights(args.make_weights)
    if args.make_weights_f16:
        make_weights(args.make_weights_f16, torch.float16)
    if args.measure:
        measure(args)
    if args.make_weights_rn50:
        make_weights_rn50(args.make_weights_rn50)
    if args.measure_rn50:
        measure_rn50(args)
    if args.serve_rn50:
        serve_rn50(args)
    if args.serve_vit:
        serve_vit(args)


if __name__ == "__main__":
    main()
