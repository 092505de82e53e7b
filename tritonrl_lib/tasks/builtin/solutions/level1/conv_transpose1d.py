import torch
import torch.nn as nn
import triton
import triton.language as tl

# Transposed convolution in gather form: output o reads input i = (o + pad - k * dil) / stride
# where that divides exactly and lies in range; one program per (batch, output channel) and block
# of outputs.


@triton.jit
def conv_transpose1d_kernel(
    x_ptr, w_ptr, bias_ptr, out_ptr, C_in, C_out, in_l, out_l, cin_per_group, cout_per_group,
    K_L: tl.constexpr, STRIDE_L: tl.constexpr, PAD_L: tl.constexpr, DIL_L: tl.constexpr,
    HAS_BIAS: tl.constexpr, BLOCK_SIZE: tl.constexpr
):
    # program (batch * C_out + co, position block): one output channel, BLOCK_SIZE positions
    pid = tl.program_id(0)
    bi = pid // C_out
    co = pid % C_out
    g = co // cout_per_group
    n_elements = out_l
    offsets = tl.program_id(1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    o_l = offsets
    acc = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    for ci in range(cin_per_group):
        c = g * cin_per_group + ci
        x_base = x_ptr + (bi * C_in + c) * (in_l)
        w_base = w_ptr + (c * cout_per_group + co % cout_per_group) * (K_L)
        for k_l in tl.static_range(K_L):
            t_l = o_l + PAD_L - k_l * DIL_L
            i_l = t_l // STRIDE_L
            ok_l = (t_l >= 0) & (t_l % STRIDE_L == 0) & (i_l < in_l)
            ld_mask = mask & ok_l
            xv = tl.load(x_base + i_l, mask=ld_mask, other=0.0).to(tl.float32)
            wv = tl.load(w_base + k_l).to(tl.float32)
            acc += xv * wv
    if HAS_BIAS:
        acc += tl.load(bias_ptr + co).to(tl.float32)
    tl.store(out_ptr + pid * n_elements + offsets, acc.to(out_ptr.dtype.element_ty), mask=mask)


def _ntuple(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def conv_transpose1d(x, weight, bias, stride, padding, dilation, output_padding, groups):
    x = x.contiguous()
    weight = weight.contiguous()
    batch, c_in = x.shape[0], x.shape[1]
    in_l, = x.shape[2:]
    k_l, = weight.shape[2:]
    stride_l, = _ntuple(stride, 1)
    pad_l, = _ntuple(padding, 1)
    dil_l, = _ntuple(dilation, 1)
    opad_l, = _ntuple(output_padding, 1)
    c_out = weight.shape[1] * groups
    out_l = (in_l - 1) * stride_l - 2 * pad_l + dil_l * (k_l - 1) + opad_l + 1
    out = torch.empty((batch, c_out, out_l), device=x.device, dtype=x.dtype)
    n_out = out_l
    BLOCK_SIZE = min(triton.next_power_of_2(n_out), 256)
    grid = lambda meta: (batch * c_out, triton.cdiv(n_out, meta["BLOCK_SIZE"]))
    conv_transpose1d_kernel[grid](
        x, weight, bias if bias is not None else weight, out, c_in, c_out,
        in_l,
        out_l,
        c_in // groups, c_out // groups,
        K_L=k_l, STRIDE_L=stride_l, PAD_L=pad_l, DIL_L=dil_l,
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
        output_padding: int,
        dilation: int,
    ):
        super(ModelNew, self).__init__()
        self.conv_transpose = nn.ConvTranspose1d(in_channels, out_channels, kernel_size, stride=stride, padding=padding,
                                                 output_padding=output_padding, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return conv_transpose1d(
            x, self.conv_transpose.weight, self.conv_transpose.bias, self.conv_transpose.stride,
            self.conv_transpose.padding, self.conv_transpose.dilation,
            self.conv_transpose.output_padding, self.conv_transpose.groups,
        )
