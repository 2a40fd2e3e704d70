#!/usr/bin/env python3
"""A tiny real PyTorch generation for `fragscope ab` on a GPU (scripts/gpu-check.sh, docs/ab.md).

A small convolutional decoder, fixed seed, turns a slowly moving latent into frames and writes
them as numbered PNGs into --out (default $FRAGSCOPE_RUN_DIR). cuDNN's benchmark mode is on, so
that the algorithms it picks may depend on the workspace the caching allocator can give (the
mechanism docs/ab.md describes); between frames it allocates and frees tensors of varying sizes,
as a pipeline with a growing cache does, so that the allocator's state differs from frame to
frame. Each frame runs inside record_function("frame N"), so a recorded run has its frames.
Needs torch with CUDA; the PNGs are written with the standard library (gen_frames.png).
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_frames import png  # noqa: E402


def decoder(channels):
    layers = []
    c = channels
    for _ in range(3):
        layers += [torch.nn.ConvTranspose2d(c, c // 2, 4, stride=2, padding=1), torch.nn.GELU()]
        c //= 2
    layers += [torch.nn.Conv2d(c, 3, 3, padding=1), torch.nn.Sigmoid()]
    return torch.nn.Sequential(*layers)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.environ.get("FRAGSCOPE_RUN_DIR", ""))
    p.add_argument("--frames", type=int, default=20)
    p.add_argument("--seed", type=int, default=1234)
    a = p.parse_args()
    if not a.out:
        sys.exit("torch_generation.py: --out or FRAGSCOPE_RUN_DIR is needed")
    os.makedirs(a.out, exist_ok=True)
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(a.seed)
    dev = torch.device("cuda")
    net = decoder(128).to(dev).eval()
    base = torch.randn(1, 128, 12, 16, device=dev)
    drift = torch.randn(1, 128, 12, 16, device=dev) * 0.05
    keep = []
    with torch.no_grad():
        for t in range(a.frames):
            with torch.profiler.record_function(f"frame {t}"):
                # Allocator churn: blocks of varying sizes, some kept for a while.
                churn = [torch.empty((1 + (t * 7 + k * 13) % 29) * 65536, device=dev)
                         for k in range(6)]
                keep.append(churn[t % 6])
                if len(keep) > 5:
                    keep.pop(0)
                del churn
                z = base + drift * t
                img = net(z)[0]  # 3 x 96 x 128, 0..1
                rgb = (img.clamp(0, 1) * 255).round().to(torch.uint8).permute(1, 2, 0).cpu()
            h, w, _ = rgb.shape
            try:
                data = rgb.contiguous().numpy().tobytes()
            except Exception:  # torch without numpy
                data = bytes(rgb.flatten().tolist())
            png(os.path.join(a.out, "frame_%04d.png" % t), w, h,
                [data[y * w * 3:(y + 1) * w * 3] for y in range(h)])
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
