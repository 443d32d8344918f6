"""remat for PyTorch: any model, a byte budget, eager training.

    import remat.torch as rt
    model = rt.checkpoint(model, (input_ids,), {"labels": labels}, memory="2GiB")
    loss = model(input_ids, labels=labels).loss
    loss.backward()                      # same gradients as plain autograd

See docs/python.md.
"""
from ._executor import RematRuntimeError
from ._graph import CaptureError
from ._memory import PeakMeter, measure_peak
from ._wrap import InputChanged, RematModule, checkpoint, profile

__all__ = ["checkpoint", "profile", "RematModule", "CaptureError", "RematRuntimeError",
           "InputChanged", "PeakMeter", "measure_peak"]
