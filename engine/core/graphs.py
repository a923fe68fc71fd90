"""CUDA graphs per batch-size bucket; padding rows use the scratch slot. Off, the same padded call runs eagerly."""
import functools

import torch


def capture_graph(fn, inputs: list, pool=None, stream=None, warm: bool = True):
    """One eager run first does the lazy work (cuDNN's search, Triton's and dynamo's compiles, cuBLAS's workspace);
    warm=False: a batch like one run before did it. Concurrently replayed graphs need distinct capture streams (a graph
    keeps its stream's cuBLAS workspace)."""
    if warm:
        side = stream or torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn(*inputs)
        torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool, stream=stream):
        out = fn(*inputs)
    return graph, out


SIZES = [1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256]    # then every 64: <= 20% padding
# the codec decoder's: each capture runs cuDNN's search (~1.2 s); a decode takes 1.6-3 ms at 1-64 streams (H100), so
# padding there costs a step little; every 128 past 512 (<= 25%; near a full engine every bucket is close)
DECODE_SIZES = [1, 16, 64, 128, 192, 256, 384, 512]
DECODE_MOST = 1024      # larger decodes replay its graph in slices: past 512 streams a decode's time is linear in them


def buckets_up_to(n: int, sizes: list[int] = SIZES, step: int = 64, graphs: bool = False) -> list[int]:
    """graphs: no bucket of 1 (dynamo specializes a size of 1, so it would trace the compiled layers again; a lone
    stream rides the 2-row graph with one scratch row)."""
    sizes = sizes + list(range(sizes[-1] + step, max(n, sizes[-1]) + step, step))
    ladder = [b for b in sizes if b < n] + [n]
    return sorted({max(b, 2) for b in ladder}) if graphs else ladder


def decode_buckets_up_to(n: int, graphs: bool = False) -> list[int]:
    return buckets_up_to(min(n, DECODE_MOST), DECODE_SIZES, 128, graphs)


def alike(bucket: int) -> bool:
    """Batches the compiled code runs as it runs the largest: past the few-row kernels, and of the Triton
    specializations of multiples of 16."""
    return bucket > 32 and bucket % 16 == 0


class StagedGraphs:
    def __init__(self, fn, pads: list, buckets: list[int], use_graphs: bool, pool=None, stream=None,
                 split: bool = False, warm_each: bool = False):
        """pads[i]: fill value of input i's padding rows; split: rows are independent, so a batch past the largest
        bucket runs in slices of it (else eagerly, whole); warm_each: every bucket's capture runs it eagerly first
        (cuDNN searches per shape), else only the first of `alike` buckets per variant."""
        self.fn, self.pads, self.buckets, self.use_graphs, self.split = fn, pads, buckets, use_graphs, split
        self.pool, self.stream, self.warm_each = pool, stream, warm_each
        self.graphs: dict = {}
        self.warmed: set = set()

    def bucket(self, batch: int) -> int:
        return next(b for b in self.buckets if b >= batch)

    def pad(self, inputs, bucket: int):
        out = []
        for x, pad in zip(inputs, self.pads):
            full = torch.full((bucket, *x.shape[1:]), pad, dtype=x.dtype, device=x.device)
            full[:x.shape[0]] = x
            out.append(full)
        return out

    def __call__(self, variant, *inputs):
        batch = inputs[0].shape[0]
        most = self.buckets[-1]
        if batch > most and not self.split:
            return self.fn(variant, *inputs)
        if batch > most:        # each slice copied out once, before the next replay overwrites the graph's output
            out = None
            for i in range(0, batch, most):
                part = self(variant, *(x[i:i + most] for x in inputs))
                out = part.new_empty((batch, *part.shape[1:])) if out is None else out
                out[i:i + len(part)].copy_(part)
            return out
        bucket = self.bucket(batch)
        if not self.use_graphs:
            return self.fn(variant, *self.pad(inputs, bucket))[:batch]
        key = (bucket, variant)
        if key not in self.graphs:
            self.capture(variant, bucket, inputs)
        graph, static_in, static_out = self.graphs[key]
        for buf, x, pad in zip(static_in, inputs, self.pads):
            buf[:batch].copy_(x)
            buf[batch:].fill_(pad)
        graph.replay()
        return static_out[:batch]

    def release(self) -> None:
        """Drops every graph (a bench switching kernels): the next capture starts a new pool, since the allocator
        refuses to share a pool whose graphs are all gone until empty_cache has freed it."""
        self.graphs.clear()
        self.warmed.clear()
        self.pool = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def capture(self, variant, bucket: int, like) -> None:
        """Capture on padding only (the scratch slot), so live streams' state is untouched."""
        static_in = self.pad([x[:0] for x in like], bucket)
        warm = self.warm_each or not alike(bucket) or variant not in self.warmed
        if alike(bucket):
            self.warmed.add(variant)
        graph, static_out = capture_graph(functools.partial(self.fn, variant), static_in, self.pool,
                                          stream=self.stream, warm=warm)
        self.pool = graph.pool()
        self.graphs[(bucket, variant)] = (graph, static_in, static_out)
