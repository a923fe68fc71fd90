"""Host <-> device transfers that never make the host wait for the device's queue.

A plain `.to("cuda")` of host memory synchronizes the stream: the host waits until every kernel queued before it
has run, so it cannot prepare the next step while the GPU computes this one. Uploads are staged in pinned memory
instead (the caching host allocator keeps a block until its copy has run) and queued behind the work so far;
downloads land in pinned memory and are awaited only where they are read."""
import torch


def upload(values, dtype: torch.dtype | None = None, device=None) -> torch.Tensor:
    """A list, numpy array or CPU tensor (in `dtype`, default its own) -> a tensor on `device`, queued (no wait)
    where that is a GPU."""
    host = torch.as_tensor(values, dtype=dtype)
    if device is None or torch.device(device).type != "cuda" or host.is_cuda:
        return host.to(device)
    return host.pin_memory().to(device, non_blocking=True)


class HostCopy:
    """Device-to-host copies into pinned memory, started now (behind the work queued so far), awaited later."""

    def __init__(self, *tensors: torch.Tensor):
        self.event = None
        if tensors[0].is_cuda:
            pinned = [torch.empty(t.shape, dtype=t.dtype, pin_memory=True) for t in tensors]
            for dst, src in zip(pinned, tensors):
                dst.copy_(src, non_blocking=True)
            tensors, self.event = pinned, torch.cuda.Event()
            self.event.record()
        self.tensors = tensors

    def wait(self) -> list:
        if self.event is not None:
            self.event.synchronize()
        return [t.numpy() for t in self.tensors]
