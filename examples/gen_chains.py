#!/usr/bin/env python3
"""Writes the example chains in examples/ ("remat-chain-1", see docs/formats.md).

    python3 examples/gen_chains.py          # regenerates every file
    python3 examples/gen_chains.py --check  # fails if a file differs

The chains are estimates built from architecture shapes (no PyTorch needed),
with rotor's stage granularity: one stage per residual block (ResNet), per
dense layer or transition (DenseNet), per module (Inception), plus the stem,
the head and a tiny loss stage last. The output is deterministic: running the
script again reproduces the files byte for byte.

How each figure is estimated (fp32, 4 bytes per element, batch N):

* out_bytes: the stage's output tensor.
* saved_bytes: what autograd keeps for the stage's backward, plus the output
  (abar[i] includes a[i]; each tensor is counted once). Convolutions and linear
  layers keep their input, batch norm keeps its input, ReLU keeps its output,
  max pooling keeps its input and int64 indices; additions, concatenations and
  average pooling keep nothing. Tensors equal to the stage input are not
  counted: the input is a[i-1], which B reads separately.
* fwd_time (ms): a roofline sum over the stage's layers, each taking
  max(FLOPs / 10 TFLOP/s, bytes moved / 500 GB/s). bwd_time = 2 x fwd_time.
* fwd_overhead: a cuDNN workspace estimate, min(largest conv output / 8, 64 MiB).
* bwd_overhead: the same workspace plus one gradient buffer of the stage's
  largest internal tensor (alive while B walks through the stage).
* grad_bytes equals out_bytes (written explicitly); the loss stage's is 0.
"""
import json
import os
import sys

FLOPS = 10e12          # nominal compute, FLOP/s
BANDWIDTH = 500e9      # nominal device memory bandwidth, bytes/s
ELT = 4                # fp32
WORKSPACE_CAP = 64 << 20
HERE = os.path.dirname(os.path.abspath(__file__))


def fmt_float(x):
    """Shortest of %.15g..%.17g that reads back exactly (as the C writer does)."""
    for p in (15, 16, 17):
        s = "%.*g" % (p, x)
        if float(s) == x:
            return s
    return "%.17g" % x


class Tensor:
    def __init__(self, c, h, w, n):
        self.c, self.h, self.w, self.n = c, h, w, n

    def numel(self):
        return self.n * self.c * self.h * self.w

    def bytes(self):
        return self.numel() * ELT


class Stage:
    """Records the layers of one stage: saved tensors, time, workspace."""

    def __init__(self, name, x):
        self.name = name
        self.input = x
        self.saved = []      # tensors kept for backward (by identity)
        self.internal = []   # tensors created inside the stage
        self.seconds = 0.0
        self.workspace = 0

    def _keep(self, t):
        if t is not self.input and all(t is not s for s in self.saved):
            self.saved.append(t)

    def _cost(self, flops, moved):
        self.seconds += max(flops / FLOPS, moved / BANDWIDTH)

    def _new(self, c, h, w, like):
        t = Tensor(c, h, w, like.n)
        self.internal.append(t)
        return t

    def conv(self, x, cout, k, stride=1, pad=0):
        kh, kw = (k, k) if isinstance(k, int) else k
        ph, pw = (pad, pad) if isinstance(pad, int) else pad
        ho = (x.h + 2 * ph - kh) // stride + 1
        wo = (x.w + 2 * pw - kw) // stride + 1
        y = self._new(cout, ho, wo, x)
        weights = cout * x.c * kh * kw * ELT
        self._cost(2.0 * y.numel() * x.c * kh * kw, x.bytes() + y.bytes() + weights)
        self._keep(x)
        self.workspace = max(self.workspace, min(y.bytes() // 8, WORKSPACE_CAP))
        return y

    def bn(self, x):
        y = self._new(x.c, x.h, x.w, x)
        self._cost(5.0 * x.numel(), 3 * x.bytes())  # stats pass + normalize pass
        self._keep(x)
        return y

    def relu(self, x):
        y = self._new(x.c, x.h, x.w, x)  # in place: x's storage is reused
        self.internal.remove(y)
        if x in self.internal:
            self.internal[self.internal.index(x)] = y
        self._cost(1.0 * x.numel(), 2 * x.bytes())
        self._keep(y)
        return y

    def bn_relu(self, x):
        return self.relu(self.bn(x))

    def conv_bn_relu(self, x, cout, k, stride=1, pad=0):
        return self.bn_relu(self.conv(x, cout, k, stride, pad))

    def maxpool(self, x, k, stride, pad=0):
        ho = (x.h + 2 * pad - k) // stride + 1
        wo = (x.w + 2 * pad - k) // stride + 1
        y = self._new(x.c, ho, wo, x)
        self._cost(1.0 * y.numel() * k * k, x.bytes() + y.bytes())
        self._keep(x)
        # int64 argmax indices, one per output element: twice an fp32 tensor.
        self.saved.append(Tensor(2 * x.c, ho, wo, x.n))
        return y

    def avgpool(self, x, k, stride, pad=0):
        ho = (x.h + 2 * pad - k) // stride + 1
        wo = (x.w + 2 * pad - k) // stride + 1
        y = self._new(x.c, ho, wo, x)
        self._cost(1.0 * y.numel() * k * k, x.bytes() + y.bytes())
        return y

    def global_avgpool(self, x):
        y = self._new(x.c, 1, 1, x)
        self._cost(1.0 * x.numel(), x.bytes())
        return y

    def linear(self, x, out_features):
        y = self._new(out_features, 1, 1, x)
        in_features = x.c * x.h * x.w
        weights = in_features * out_features * ELT
        self._cost(2.0 * x.n * in_features * out_features, x.bytes() + y.bytes() + weights)
        self._keep(x)
        return y

    def add(self, x, y):
        z = self._new(x.c, x.h, x.w, x)
        self._cost(1.0 * x.numel(), 3 * x.bytes())
        return z

    def cat(self, parts):
        z = self._new(sum(p.c for p in parts), parts[0].h, parts[0].w, parts[0])
        self._cost(0.0, 2 * z.bytes())
        return z

    def finish(self, out, out_bytes=None):
        if out_bytes is None:
            out_bytes = out.bytes()
        saved = out_bytes + sum(t.bytes() for t in self.saved if t is not out)
        inner = [t.bytes() for t in self.internal if t is not out]
        fwd_ms = round(self.seconds * 1e3, 6)
        return {
            "name": self.name,
            "fwd_time": fwd_ms,
            "bwd_time": round(2 * fwd_ms, 6),
            "out_bytes": out_bytes,
            "saved_bytes": saved,
            "grad_bytes": out_bytes,
            "fwd_overhead": self.workspace,
            "bwd_overhead": self.workspace + max(inner, default=0),
        }


class Chain:
    def __init__(self, name, n, c, h, w):
        self.name = name
        self.x = Tensor(c, h, w, n)
        self.input_bytes = self.x.bytes()
        self.stages = []

    def stage(self, name, body):
        """body(stage, x) -> output tensor (or (tensor, out_bytes))."""
        st = Stage(name, self.x)
        res = body(st, self.x)
        out, nbytes = res if isinstance(res, tuple) else (res, None)
        self.stages.append(st.finish(out, nbytes))
        self.x = out

    def loss(self, classes):
        st = Stage("loss", self.x)
        logits = self.x
        st._cost(5.0 * logits.numel(), 3 * logits.bytes())
        # Cross entropy keeps its log-softmax output for the backward.
        st.saved.append(Tensor(classes, 1, 1, logits.n))
        scalar = Tensor(1, 1, 1, 1)
        self.stages.append(st.finish(scalar))
        self.stages[-1]["grad_bytes"] = 0  # the seed d[n] counts 0

    def to_json(self):
        lines = ["{",
                 '  "format": "remat-chain-1",',
                 '  "name": %s,' % json.dumps(self.name),
                 '  "time_unit": "ms",',
                 '  "input_bytes": %d,' % self.input_bytes,
                 '  "input_grad_bytes": %d,' % self.input_bytes,
                 '  "stages": [']
        for k, s in enumerate(self.stages):
            sep = "," if k + 1 < len(self.stages) else ""
            lines.append(
                '    {"name": %s, "fwd_time": %s, "bwd_time": %s, "out_bytes": %d, '
                '"saved_bytes": %d, "grad_bytes": %d, "fwd_overhead": %d, "bwd_overhead": %d}%s'
                % (json.dumps(s["name"]), fmt_float(s["fwd_time"]), fmt_float(s["bwd_time"]),
                   s["out_bytes"], s["saved_bytes"], s["grad_bytes"], s["fwd_overhead"],
                   s["bwd_overhead"], sep))
        lines += ["  ]", "}"]
        return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- ResNet

def resnet_stem(ch, split=False):
    def stem(st, x):
        return st.maxpool(st.conv_bn_relu(x, 64, 7, 2, 3), 3, 2, 1)
    if not split:
        ch.stage("stem", stem)
        return
    ch.stage("conv1", lambda st, x: st.conv(x, 64, 7, 2, 3))
    ch.stage("bn1-relu", lambda st, x: st.bn_relu(x))
    ch.stage("maxpool", lambda st, x: st.maxpool(x, 3, 2, 1))


def basic_block(planes, stride):
    def body(st, x):
        y = st.conv_bn_relu(x, planes, 3, stride, 1)
        y = st.bn(st.conv(y, planes, 3, 1, 1))
        sc = x
        if stride != 1 or x.c != planes:
            sc = st.bn(st.conv(x, planes, 1, stride))
        return st.relu(st.add(y, sc))
    return body


def bottleneck(planes, stride):
    def body(st, x):
        y = st.conv_bn_relu(x, planes, 1)
        y = st.conv_bn_relu(y, planes, 3, stride, 1)
        y = st.bn(st.conv(y, planes * 4, 1))
        sc = x
        if stride != 1 or x.c != planes * 4:
            sc = st.bn(st.conv(x, planes * 4, 1, stride))
        return st.relu(st.add(y, sc))
    return body


def resnet(name, batch, size, block, layers, widths=(64, 128, 256, 512), split_ends=False):
    ch = Chain(name, batch, 3, size, size)
    resnet_stem(ch, split_ends)
    for g, (planes, count) in enumerate(zip(widths, layers)):
        for b in range(count):
            stride = 2 if g > 0 and b == 0 else 1
            ch.stage("layer%d.%d" % (g + 1, b), block(planes, stride))
    if split_ends:
        ch.stage("avgpool", lambda st, x: st.global_avgpool(x))
        ch.stage("fc", lambda st, x: st.linear(x, 1000))
    else:
        ch.stage("head", lambda st, x: st.linear(st.global_avgpool(x), 1000))
    ch.loss(1000)
    return ch


# ---------------------------------------------------------------- DenseNet

def dense_layer(growth, bn_size=4):
    def body(st, x):
        y = st.conv(st.bn_relu(x), bn_size * growth, 1)
        y = st.conv(st.bn_relu(y), growth, 3, 1, 1)
        return st.cat([x, y])
    return body


def dense_half1(bn_size_growth):
    # BN-ReLU-conv1x1. Its output is the pair (x, bottleneck): the second half
    # needs x for the concatenation. out_bytes counts both, so holding a[i-1]
    # and a[i] together counts x twice: a conservative estimate.
    def body(st, x):
        y = st.conv(st.bn_relu(x), bn_size_growth, 1)
        return Tensor(x.c + y.c, x.h, x.w, x.n)
    return body


def dense_half2(growth, bottleneck_c):
    def body(st, pair):
        # The bottleneck half of the input pair is part of a[i-1]: not counted.
        b = Tensor(bottleneck_c, pair.h, pair.w, pair.n)
        st.input = b
        y = st.conv(st.bn_relu(b), growth, 3, 1, 1)
        out = st.cat([Tensor(pair.c - bottleneck_c, pair.h, pair.w, pair.n), y])
        return out
    return body


def transition(out_c):
    def body(st, x):
        return st.avgpool(st.conv(st.bn_relu(x), out_c, 1), 2, 2)
    return body


def densenet(name, batch, size, layers=(6, 12, 24, 16), growth=32, init=64, split=False):
    ch = Chain(name, batch, 3, size, size)
    if split:
        ch.stage("conv0", lambda st, x: st.conv_bn_relu(x, init, 7, 2, 3))
        ch.stage("pool0", lambda st, x: st.maxpool(x, 3, 2, 1))
    else:
        ch.stage("stem", lambda st, x: st.maxpool(st.conv_bn_relu(x, init, 7, 2, 3), 3, 2, 1))
    c = init
    for g, count in enumerate(layers):
        for k in range(count):
            lname = "block%d.layer%d" % (g + 1, k + 1)
            if split:
                ch.stage(lname + ".a", dense_half1(4 * growth))
                ch.stage(lname + ".b", dense_half2(growth, 4 * growth))
            else:
                ch.stage(lname, dense_layer(growth))
            c += growth
        if g + 1 < len(layers):
            c //= 2
            ch.stage("transition%d" % (g + 1), transition(c))
    ch.stage("head", lambda st, x: st.linear(st.global_avgpool(st.bn_relu(x)), 1000))
    ch.loss(1000)
    return ch


# ---------------------------------------------------------------- Inception v3

def inception_a(pool_features):
    def body(st, x):
        b1 = st.conv_bn_relu(x, 64, 1)
        b5 = st.conv_bn_relu(st.conv_bn_relu(x, 48, 1), 64, 5, 1, 2)
        b3 = st.conv_bn_relu(x, 64, 1)
        b3 = st.conv_bn_relu(st.conv_bn_relu(b3, 96, 3, 1, 1), 96, 3, 1, 1)
        bp = st.conv_bn_relu(st.avgpool(x, 3, 1, 1), pool_features, 1)
        return st.cat([b1, b5, b3, bp])
    return body


def inception_b(st, x):
    b3 = st.conv_bn_relu(x, 384, 3, 2)
    bd = st.conv_bn_relu(st.conv_bn_relu(x, 64, 1), 96, 3, 1, 1)
    bd = st.conv_bn_relu(bd, 96, 3, 2)
    bp = st.maxpool(x, 3, 2)
    return st.cat([b3, bd, bp])


def inception_c(c7):
    def body(st, x):
        b1 = st.conv_bn_relu(x, 192, 1)
        b7 = st.conv_bn_relu(x, c7, 1)
        b7 = st.conv_bn_relu(b7, c7, (1, 7), 1, (0, 3))
        b7 = st.conv_bn_relu(b7, 192, (7, 1), 1, (3, 0))
        bd = st.conv_bn_relu(x, c7, 1)
        bd = st.conv_bn_relu(bd, c7, (7, 1), 1, (3, 0))
        bd = st.conv_bn_relu(bd, c7, (1, 7), 1, (0, 3))
        bd = st.conv_bn_relu(bd, c7, (7, 1), 1, (3, 0))
        bd = st.conv_bn_relu(bd, 192, (1, 7), 1, (0, 3))
        bp = st.conv_bn_relu(st.avgpool(x, 3, 1, 1), 192, 1)
        return st.cat([b1, b7, bd, bp])
    return body


def inception_d(st, x):
    b3 = st.conv_bn_relu(st.conv_bn_relu(x, 192, 1), 320, 3, 2)
    b7 = st.conv_bn_relu(x, 192, 1)
    b7 = st.conv_bn_relu(b7, 192, (1, 7), 1, (0, 3))
    b7 = st.conv_bn_relu(b7, 192, (7, 1), 1, (3, 0))
    b7 = st.conv_bn_relu(b7, 192, 3, 2)
    bp = st.maxpool(x, 3, 2)
    return st.cat([b3, b7, bp])


def inception_e(st, x):
    b1 = st.conv_bn_relu(x, 320, 1)
    b3 = st.conv_bn_relu(x, 384, 1)
    b3 = st.cat([st.conv_bn_relu(b3, 384, (1, 3), 1, (0, 1)),
                 st.conv_bn_relu(b3, 384, (3, 1), 1, (1, 0))])
    bd = st.conv_bn_relu(st.conv_bn_relu(x, 448, 1), 384, 3, 1, 1)
    bd = st.cat([st.conv_bn_relu(bd, 384, (1, 3), 1, (0, 1)),
                 st.conv_bn_relu(bd, 384, (3, 1), 1, (1, 0))])
    bp = st.conv_bn_relu(st.avgpool(x, 3, 1, 1), 192, 1)
    return st.cat([b1, b3, bd, bp])


def inception3(name, batch, size):
    ch = Chain(name, batch, 3, size, size)
    ch.stage("Conv2d_1a_3x3", lambda st, x: st.conv_bn_relu(x, 32, 3, 2))
    ch.stage("Conv2d_2a_3x3", lambda st, x: st.conv_bn_relu(x, 32, 3))
    ch.stage("Conv2d_2b_3x3", lambda st, x: st.conv_bn_relu(x, 64, 3, 1, 1))
    ch.stage("maxpool1", lambda st, x: st.maxpool(x, 3, 2))
    ch.stage("Conv2d_3b_1x1", lambda st, x: st.conv_bn_relu(x, 80, 1))
    ch.stage("Conv2d_4a_3x3", lambda st, x: st.conv_bn_relu(x, 192, 3))
    ch.stage("maxpool2", lambda st, x: st.maxpool(x, 3, 2))
    ch.stage("Mixed_5b", inception_a(32))
    ch.stage("Mixed_5c", inception_a(64))
    ch.stage("Mixed_5d", inception_a(64))
    ch.stage("Mixed_6a", inception_b)
    for nm, c7 in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160), ("Mixed_6e", 192)):
        ch.stage(nm, inception_c(c7))
    ch.stage("Mixed_7a", inception_d)
    ch.stage("Mixed_7b", inception_e)
    ch.stage("Mixed_7c", inception_e)
    ch.stage("head", lambda st, x: st.linear(st.global_avgpool(x), 1000))
    ch.loss(1000)
    return ch


# ---------------------------------------------------------------- tiny

TINY = """{
  "format": "remat-chain-1",
  "name": "tiny",
  "time_unit": "ms",
  "input_bytes": 10,
  "input_grad_bytes": 10,
  "stages": [
    {"name": "s1", "fwd_time": 1, "bwd_time": 2, "out_bytes": 20, "saved_bytes": 50, "grad_bytes": 20, "fwd_overhead": 0, "bwd_overhead": 0},
    {"name": "s2", "fwd_time": 2, "bwd_time": 4, "out_bytes": 10, "saved_bytes": 30, "grad_bytes": 10, "fwd_overhead": 5, "bwd_overhead": 10},
    {"name": "s3", "fwd_time": 1, "bwd_time": 3, "out_bytes": 20, "saved_bytes": 40, "grad_bytes": 20, "fwd_overhead": 0, "bwd_overhead": 0},
    {"name": "loss", "fwd_time": 1, "bwd_time": 1, "out_bytes": 1, "saved_bytes": 21, "grad_bytes": 0, "fwd_overhead": 0, "bwd_overhead": 0}
  ]
}
"""


def chains():
    """(file name, chain) for every example, in a fixed order."""
    return [
        ("resnet18-like.json", resnet("resnet18-b32-224", 32, 224, basic_block, (2, 2, 2, 2))),
        ("resnet50-b16-500.json", resnet("resnet50-b16-500", 16, 500, bottleneck, (3, 4, 6, 3))),
        ("resnet101-b16-500.json", resnet("resnet101-b16-500", 16, 500, bottleneck, (3, 4, 23, 3))),
        ("densenet121-b16-500.json", densenet("densenet121-b16-500", 16, 500)),
        ("inception3-b16-500.json", inception3("inception3-b16-500", 16, 500)),
        ("resnet1001-like.json", resnet("resnet1001-b8-224", 8, 224, bottleneck, (111, 111, 111),
                                        widths=(64, 128, 256), split_ends=True)),
        ("densenet121-thesis.json", densenet("densenet121-split-b64-224", 64, 224, split=True)),
    ]


def store_all_peak(ch):
    """Peak of Fall 1..n then B n..1 under the SPEC's memory rules."""
    s = ch.stages
    grad = [ch.input_bytes] + [x["grad_bytes"] for x in s[:-1]] + [0]  # d[0..n]
    mem = peak = ch.input_bytes
    for x in s:
        peak = max(peak, mem + x["saved_bytes"] + x["fwd_overhead"])
        mem += x["saved_bytes"]
    for i in range(len(s), 0, -1):
        x = s[i - 1]
        peak = max(peak, mem + grad[i - 1] + x["bwd_overhead"])
        mem += grad[i - 1] - grad[i] - x["saved_bytes"]
    return peak


def main(argv):
    check = "--check" in argv
    if "--stats" in argv:
        for name, ch in chains():
            t = sum(x["fwd_time"] + x["bwd_time"] for x in ch.stages)
            print("%-26s n=%4d  store-all ~%7.2f GiB  time %8.1f ms" %
                  (name, len(ch.stages), store_all_peak(ch) / 2**30, t))
        return 0
    outputs = [(name, ch.to_json()) for name, ch in chains()] + [("tiny.json", TINY)]
    bad = 0
    for name, text in outputs:
        path = os.path.join(HERE, name)
        if check:
            with open(path, encoding="utf-8") as f:
                if f.read() != text:
                    print("differs: %s" % path)
                    bad = 1
            continue
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    return bad


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
