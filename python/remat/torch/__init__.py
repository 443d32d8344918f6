"""remat for PyTorch: any model, a byte budget, eager training.

    import remat.torch as rt
    model = rt.checkpoint(model, (input_ids,), {"labels": labels}, memory="2GiB")
    loss = model(input_ids, labels=labels).loss
    loss.backward()                      # same gradients as plain autograd

    rt.enable(model, memory="2GiB")      # or in place, keeping the model's class

See docs/python.md; docs/architecture.md says which file does what.
"""
from ._api import InputChanged, RematModule, checkpoint, profile
from ._enable import EnabledRemat, disable, enable, enabled
from ._executor import RematRuntimeError
from ._memory import PeakMeter, measure_peak
from ._program import CaptureError

__all__ = ["checkpoint", "profile", "enable", "disable", "enabled", "RematModule",
           "EnabledRemat", "CaptureError", "RematRuntimeError", "InputChanged", "PeakMeter",
           "measure_peak"]
