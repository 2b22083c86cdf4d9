"""Blocking, as the quant crate's `block.rs` does it: how block formats cut a tensor into blocks
that share an exponent or a bias, and the per-block maximum they share it by.

1. The tensor is seen with at most three dimensions: a scalar as `[1]`; rank 4 and above as
   `[prod(leading), H, W]` with `skip_first_dim` forced on.
2. The block size is right-aligned to that view; missing entries, entries of 0 (MASE's -1) and
   entries larger than their dimension cover the whole dimension; with `skip_first_dim` (views of
   rank 2 or 3) the first dimension's block is 1.
3. Blocks tile the view from its start; the last block may be partial (padded with zeros, which
   changes no block maximum).

The shared statistic is `max |x|` over the block, NaN if the block holds a NaN; if every block is
zero they all become 1, else zero blocks take the smallest non-zero maximum."""

import math

import torch


def blocking(shape, block_size, skip_first_dim):
    """`(dims, tile)`: the view as three dimensions and the block size along each."""
    shape = list(shape)
    r = len(shape)
    if r == 0:
        view, skip = [1], False
    elif r == 1:
        view, skip = shape, False
    elif r in (2, 3):
        view, skip = shape, skip_first_dim
    else:
        view, skip = [math.prod(shape[:-2]), shape[-2], shape[-1]], True
    r = len(view)
    tile = []
    for d in range(r):
        from_end = r - d
        want = block_size[len(block_size) - from_end] if len(block_size) >= from_end else None
        dim = 1 if skip and d == 0 else view[d]
        tile.append(want if want is not None and 1 <= want <= dim else dim)
    dims = [1] * (3 - r) + view
    tile = [max(t, 1) for t in [1] * (3 - r) + tile]
    return dims, tile


def run_blocks(x, block_size, skip_first_dim, per_block, elem):
    """Quantizes `x` block by block: `per_block(guarded block maxima)` gives the blocks'
    parameters (tensors of the grid's shape, broadcast to every value of their block), and
    `elem(values, parameters)` quantizes the values with them."""
    if x.numel() == 0:
        return x.clone()
    dims, tile = blocking(x.shape, block_size, skip_first_dim)
    grid = [-(-d // t) for d, t in zip(dims, tile)]
    v = x.reshape(dims)
    pad = [g * t - d for g, t, d in zip(grid, tile, dims)]
    # F.pad pads the last dimension first.
    v = torch.nn.functional.pad(v, (0, pad[2], 0, pad[1], 0, pad[0]))
    blocks = v.reshape(grid[0], tile[0], grid[1], tile[1], grid[2], tile[2])
    maxes = blocks.abs().amax(dim=(1, 3, 5), keepdim=True)
    # MASE's guard against log2(0): zero blocks take the smallest non-zero maximum (NaN if a block
    # is NaN, as torch.min gives), and all blocks become 1 if every block is zero.
    nonzero = maxes != 0
    smallest = torch.where(nonzero, maxes, torch.full_like(maxes, float("inf"))).amin()
    guarded = torch.where(nonzero, maxes, smallest)
    guarded = torch.where(nonzero.any(), guarded, torch.ones_like(guarded))
    out = elem(blocks, per_block(guarded))
    out = out.reshape(grid[0] * tile[0], grid[1] * tile[1], grid[2] * tile[2])
    return out[: dims[0], : dims[1], : dims[2]].reshape(x.shape)
