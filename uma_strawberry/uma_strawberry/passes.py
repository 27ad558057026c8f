"""Strawberry's TIR pass: inserts the DMA transfers around the compute calls (no Relay: the
Relay passes that prepare each offloaded layer are in ``patterns.py``)."""

from tvm import tir

from tvm_extension.api import stages

from . import program
from .target import NAME as TARGET
from .tiling import Config, Layer, lower_bound, plan_layer

ATTR = "StrawberryLayer"  # function attribute: the roles of the parameters, window and output stage
log = stages.logger.getChild(TARGET)


@tir.transform.prim_func_pass(opt_level=2)
class StrawberryDMAPass:
    """Replace an offloaded conv (+ bias, + residual, + activation) by its tiles: per tile, DMA
    transfers of the weights, the input (padded on the way in) and the residual into scratchpad
    buffers, the engine's call on scratchpad addresses, and a DMA transfer of the output tile
    back to host memory; the split is ``tiling.plan_layer``'s for the current target attributes."""

    def transform_function(self, func, mod, ctx):
        relay_attrs = func.attrs["relay_attrs"] if func.attrs and "relay_attrs" in func.attrs else None
        if relay_attrs is None or ATTR not in relay_attrs:
            return func
        described = relay_attrs[ATTR]
        config = Config.from_attrs(func.attrs["target_attrs"])
        buffers = [func.buffer_map[p] for p in func.params]
        ifmap, weights, ofmap = buffers[int(described["ifmap"])], buffers[int(described["weights"])], buffers[-1]
        layout = str(described["layout"])
        size = dict(zip(layout, (int(d) for d in ifmap.shape)))
        out = dict(zip(layout, (int(d) for d in ofmap.shape)))
        oc, weight_ic, kh, kw = (int(d) for d in weights.shape)
        depthwise = bool(int(described["depthwise"]))
        if weight_ic != (1 if depthwise else size["c"]) or out["c"] != oc:
            raise ValueError(f"{func.attrs['global_symbol']}: weights {list(weights.shape)} do not fit its input and output")
        host = {role: buffers[int(described[role])].data if role in described else None
                for role in ("ifmap", "weights", "bias", "residual", "slope")}
        host["ofmap"] = ofmap.data
        stride_h, stride_w = (int(s) for s in described["strides"])
        layer = Layer(layout=layout, depthwise=depthwise, ic=size["c"], ih=size["h"], iw=size["w"], oc=oc, oh=out["h"],
                      ow=out["w"], kh=kh, kw=kw, stride_h=stride_h, stride_w=stride_w,
                      pad_top=int(described["pad_top"]), pad_left=int(described["pad_left"]),
                      bias=host["bias"] is not None, residual=host["residual"] is not None,
                      slope=host["slope"] is not None)
        plan = plan_layer(layer, config)
        log.info("%s: %s (lower bound %d bytes, scratchpad %d bytes in use)", func.attrs["global_symbol"],
                 plan.describe(), lower_bound(layer), plan.occupancy_bytes)
        body = program.build(layer, plan, config, host, float(described["lo"]), float(described["hi"]))
        return func.with_body(body)


def lower_scratchpad_access():
    """Phase 3: scratchpad buffer accesses become offsets in their partition (TVM's pass; the
    build crashes without it on memory-info scopes)."""
    return tir.transform.LowerDeviceStorageAccessInfo()


__all__ = ["ATTR", "StrawberryDMAPass", "lower_scratchpad_access"]
