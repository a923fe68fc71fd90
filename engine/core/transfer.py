"""Host <-> device transfers through pinned memory: a pageable `.to("cuda")` would sync the stream."""
import torch


def upload(values, dtype: torch.dtype | None = None, device=None) -> torch.Tensor:
    host = torch.as_tensor(values, dtype=dtype)
    if device is None or torch.device(device).type != "cuda" or host.is_cuda:
        return host.to(device)
    return host.pin_memory().to(device, non_blocking=True)


class HostCopy:

    def __init__(self, *tensors: torch.Tensor):
        self.event = None
        if tensors[0].is_cuda:
            pinned = [torch.empty(t.shape, dtype=t.dtype, pin_memory=True) for t in tensors]
            for dst, src in zip(pinned, tensors):
                dst.copy_(src, non_blocking=True)
            tensors, self.event = pinned, torch.cuda.Event()
            self.event.record()
        self.tensors = tensors

    def ready(self) -> bool:
        """Whether wait() would return at once."""
        return self.event is None or self.event.query()

    def wait(self) -> list:
        if self.event is not None:
            self.event.synchronize()
        return [t.numpy() for t in self.tensors]
