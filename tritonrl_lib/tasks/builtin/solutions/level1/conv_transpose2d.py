import torch
import torch.nn as nn
import triton
import triton.language as tl

# Transposed convolution in gather form: output o reads input i = (o + pad - k * dil) / stride
# where that divides exactly and lies in range; one program per (batch, output channel) and block
# of outputs.


@triton.jit
def conv_transpose2d_kernel(
    x_ptr, w_ptr, bias_ptr, out_ptr, C_in, C_out, in_h, in_w, out_h, out_w, cin_per_group,
    cout_per_group, K_H: tl.constexpr, STRIDE_H: tl.constexpr, PAD_H: tl.constexpr,
    DIL_H: tl.constexpr, K_W: tl.constexpr, STRIDE_W: tl.constexpr, PAD_W: tl.constexpr,
    DIL_W: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_SIZE: tl.constexpr
):
    # program (batch * C_out + co, position block): one output channel, BLOCK_SIZE positions
    pid = tl.program_id(0)
    bi = pid // C_out
    co = pid % C_out
    g = co // cout_per_group
    n_elements = out_h * out_w
    offsets = tl.program_id(1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    o_w = offsets % out_w
    o_h = (offsets // out_w)
    acc = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    for ci in range(cin_per_group):
        c = g * cin_per_group + ci
        x_base = x_ptr + (bi * C_in + c) * (in_h * in_w)
        w_base = w_ptr + (c * cout_per_group + co % cout_per_group) * (K_H * K_W)
        for k_h in tl.static_range(K_H):
            t_h = o_h + PAD_H - k_h * DIL_H
            i_h = t_h // STRIDE_H
            ok_h = (t_h >= 0) & (t_h % STRIDE_H == 0) & (i_h < in_h)
            for k_w in tl.static_range(K_W):
                t_w = o_w + PAD_W - k_w * DIL_W
                i_w = t_w // STRIDE_W
                ok_w = (t_w >= 0) & (t_w % STRIDE_W == 0) & (i_w < in_w)
                ld_mask = mask & ok_h & ok_w
                xv = tl.load(x_base + i_h * in_w + i_w, mask=ld_mask, other=0.0).to(tl.float32)
                wv = tl.load(w_base + k_h * K_W + k_w).to(tl.float32)
                acc += xv * wv
    if HAS_BIAS:
        acc += tl.load(bias_ptr + co).to(tl.float32)
    tl.store(out_ptr + pid * n_elements + offsets, acc.to(out_ptr.dtype.element_ty), mask=mask)


def _ntuple(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def conv_transpose2d(x, weight, bias, stride, padding, dilation, output_padding, groups):
    x = x.contiguous()
    weight = weight.contiguous()
    batch, c_in = x.shape[0], x.shape[1]
    in_h, in_w = x.shape[2:]
    k_h, k_w = weight.shape[2:]
    stride_h, stride_w = _ntuple(stride, 2)
    pad_h, pad_w = _ntuple(padding, 2)
    dil_h, dil_w = _ntuple(dilation, 2)
    opad_h, opad_w = _ntuple(output_padding, 2)
    c_out = weight.shape[1] * groups
    out_h = (in_h - 1) * stride_h - 2 * pad_h + dil_h * (k_h - 1) + opad_h + 1
    out_w = (in_w - 1) * stride_w - 2 * pad_w + dil_w * (k_w - 1) + opad_w + 1
    out = torch.empty((batch, c_out, out_h, out_w), device=x.device, dtype=x.dtype)
    n_out = out_h * out_w
    BLOCK_SIZE = min(triton.next_power_of_2(n_out), 256)
    grid = lambda meta: (batch * c_out, triton.cdiv(n_out, meta["BLOCK_SIZE"]))
    conv_transpose2d_kernel[grid](
        x, weight, bias if bias is not None else weight, out, c_in, c_out,
        in_h, in_w,
        out_h, out_w,
        c_in // groups, c_out // groups,
        K_H=k_h, STRIDE_H=stride_h, PAD_H=pad_h, DIL_H=dil_h,
        K_W=k_w, STRIDE_W=stride_w, PAD_W=pad_w, DIL_W=dil_w,
        HAS_BIAS=bias is not None, BLOCK_SIZE=BLOCK_SIZE)
    return out


class ModelNew(nn.Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int,
        padding: int,
        groups: int,
    ):
        super(ModelNew, self).__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding,
                                                 groups=groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return conv_transpose2d(
            x, self.conv_transpose.weight, self.conv_transpose.bias, self.conv_transpose.stride,
            self.conv_transpose.padding, self.conv_transpose.dilation,
            self.conv_transpose.output_padding, self.conv_transpose.groups,
        )
