"""The fused mHC site, RoPE + quant, gate, indexer and attention kernels compiled for an H100/H200 (sm_90) on a machine without a GPU
(tests/runtime/compile_sm90.py: Triton's front end and the ptxas its wheel ships). The
interpreter runs kernels as Python, so it accepts what the compiler refuses: a plain-int
global read in the kernel passed every interpreted test and failed every compiled launch
on the H200 (issue 16). Each launch is one the default policy makes at ``mid`` / ``flash``
for decode and prefill rows; the test fails on any compile error and skips only where
Triton cannot compile for CUDA here at all."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent / "compile_sm90.py"


def run_script(*args: str) -> str:
    """compile_sm90.py with these arguments in a process of its own, without the interpreter
    (the module docstring says why), and its output; a skip where Triton cannot compile for
    sm_90 here (exit status 2), a failure on any other non-zero status."""
    pytest.importorskip("triton")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=600)
    if run.returncode == 2:
        pytest.skip(run.stdout.strip())
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    return run.stdout


def test_the_site_kernel_compiles_for_sm90_as_the_policy_launches_it():
    out = run_script("--sass", "1:2048", "8:5120", "512:2048", "4096:5120")
    # mHC: 3 sweeps + 3 finishes + 1 sweep with its tail, the other coefficient form's 3 + 1
    # (the tensor form: the default takes the registers everywhere) and the 8-row finish at
    # 8 rows (the default finishes one row per program there); every default launch's name
    # says register-finish (sweeps too: the name is the call's tiling), 7, + the 8-row finish,
    # and the 4 sweeps again with the mixing's other form: fused multiply-adds at 1 row,
    # plain at 8, 512 and 4,096 rows, where the default's every launch says fma-mix (8: sweep,
    # both finishes and the 8-row finish; 512: sweep and both finishes, 4,096: both sweeps
    # with the tail), so 1 + 9 fma-mix; the "bf16x3" sweeps at 512 and 4,096 rows (fn's bf16
    # parts: bf16 pointers), register-finish and fma-mix by name, 2 more of each; the 8-row
    # call's 5 launches project with "bf16x3" too (the decode default from 3 rows), so 7;
    # the "bf16x3" sweeps on 64-row blocks with the coefficients loaded per tile at 512 and
    # 4,096 rows, 2 more bf16x3, register-finish and fma-mix (9, 16, 14); the projection in a
    # launch of its own at 512 and 4,096 rows with "tf32x3" and "bf16x3" (sweep, projection,
    # finish: 12, 6 of them bf16x3, all register-finish and fma-mix by name: 15, 28, 26);
    # RoPE + quant: 3 formats + 2 packed; gate: every call two launches (partials, then the
    # selection: session 43), mid and flash at 1 / 8 / 64 / 512 rows (16), and each of the 8
    # selecting launches again with the rounds' other form (pairs at mid, max and sum at
    # flash), so 8 paired ones (flash's default 4, mid's other 4); indexer: mid / flash at 3
    # shapes each;
    # attention's untimed tile options: 3 partial, 1 merge, 2 with 64 heads per program and the
    # 32-head prefill tile beside them, the 64-head prefill tile prefetching its ids (and
    # loading them a tile ahead), the packed tiles of 1 and 8 queries decoding per scale group,
    # 7 of the packed decode's switches (the 1-query row with split sources, decode once, each
    # with the group decode, and all three; all three on the 8-query row and on 16 heads x 32
    # keys), mid's engine rows of 1 and 64 queries with split sources, and the 64-query rows
    # with the merge tail (mid engine, mid packed ring, flash engine: 3)
    assert out.count("ok ") == 23 + 12 + 2 + 24 + 6 + 20 + 3, out
    assert out.count(" bf16x3") == 9 + 6, out
    assert out.count(" paired |") == 8, out
    assert out.count("ok indexer ") == 6, out
    assert out.count(" register-finish") == 16 + 12 and out.count(" fma-mix") == 14 + 12, out
    assert out.count(" 1-row-finish") == 4 and out.count(" 8-row-finish") == 1, out
    # --sass: every launch's resources were read back from its cubin
    found = re.findall(r"^ok .* \| registers (\d+) stack \d+ shared \d+ \| instructions (\d+) ", out, re.M)
    assert len(found) == 90 and all(int(r) > 0 and int(n) > 0 for r, n in found), out
    # apart, the sweep has no tensor-core instruction left and the projection's launch has them
    apart = re.findall(r"^ok mhc T=\d+ D=\d+ phase (\d) .* apart \|.* HMMA (\d+) HGMMA (\d+) ", out, re.M)
    assert len(apart) == 12 and all((int(hmma) + int(hgmma) > 0) == (phase == "3") for phase, hmma, hgmma in apart), out
    # the point of loading the coefficients per tile: 64-row blocks on 2 warps without spills
    # (held through the loop, the same tiles spill 40-80 bytes under Triton 3.6 and 3.9)
    per_tile = re.findall(r"^ok mhc .* per-tile \| registers \d+ stack (\d+) ", out, re.M)
    assert per_tile == ["0", "0"], out
    # the prefetch is in the prefetching launches' code (CCTL), and in no other attention launch
    cctl = dict(re.findall(r"^ok (attention .*?) \|.* CCTL (\d+)$", out, re.M))
    assert int(cctl.pop("attention option flash h64 n32 w8 s2 prefetch ids")) > 0, out
    assert int(cctl.pop("attention option flash h64 n32 w8 s3 prefetch ids, ids ahead")) > 0, out
    assert int(cctl.pop("attention option mid T<=64 engine h32 n32 w4 s2 x4 p256 pf ia mw1 split sources")) > 0, out
    # the merge tail's launches: the ticket's acquire (an acq_rel atomic) is cache control too,
    # with the ids prefetched or not (the packed row prefetches none)
    # (the names are the rows' labels: the 64-query rows merge on one warp, "mw1", which the
    # merge tail's launches do not use)
    for name in ("mid T<=64 engine h32 n32 w4 s2 x4 p256 pf ia ss mt mw1", "flash T<=64 engine h64 n64 w8 s2 x16 p128 pf "
                 "ss f32n32 mt mw1", "mid T<=64 packed ring h16 n32 w4 s2 x16 p256 ia gd ss do mt mw1"):
        assert int(cctl.pop(f"attention option {name}")) > 0, out
    # two loops where the option splits the window's slots from the top-k's: one loop body more
    # than the same launch without it (mid's 64-query row also has its id-prefetch loop)
    loops = dict(re.findall(r"^ok (attention .*?) \|.*\| loops ([\d/]+) \|", out, re.M))
    assert sum("split sources" in name for name in loops) == 7, loops
    for name, body in loops.items():
        if "split sources" in name:
            assert len(body.split("/")) == 2 + (" pf " in name), (name, body)
    assert cctl and all(n == "0" for n in cctl.values()), cctl


def test_dependent_launches_compile_for_sm90_as_torch_compile_re_emits_them():
    """The static step with ``decode_compile`` failed on the H100 (session 47): Inductor
    re-emits a kernel that a compiled region calls in a module of its own, and the gate's
    PDL step (then a builtin of runtime/kernels/pdl.py, neither copied nor imported there)
    was undefined. Each op that launches dependently, re-emitted so, compiles for sm_90 with
    its PDL step in (a griddepcontrol instruction in its PTX)."""
    pytest.importorskip("torch._inductor.codegen.wrapper")
    out = run_script("--inductor")
    found = dict(re.findall(r"^ok inductor (.*) \| griddepcontrol (\d+)$", out, re.M))
    ops = ("attention", "mhc", "gate", "topk chained", "topk resident")
    assert set(found) == {f"{op} {role}" for op in ops for role in ("first", "dependent")} | {
        "topk row bound first", "topk row bound middle", "topk row bound dependent"}, out
    assert all(int(n) > 0 for n in found.values()), found


def load_script():
    spec = importlib.util.spec_from_file_location("compile_sm90_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SASS = """
        Function : _kernel
        /*0000*/                   MOV R1, c[0x0][0x28] ;                          /* 0x00000a0000017a02 */
        /*0010*/              @!P0 SHFL.BFLY PT, R7, R6, 0x10, 0x1f ;               /* 0x0e001f0006077f89 */
        /*0020*/                   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;           /* 0x0000000c0804723c */
        /*0030*/                   NOP ;                                           /* 0x0000000000007918 */
        /*0040*/               @P1 BRA 0x10 ;                                      /* 0xfffffffc00f01947 */
        /*1a50*/                   EXIT ;                                          /* 0x000000000000794d */
"""


def test_sass_parsing_counts_instructions_and_opcodes_by_base_name():
    pytest.importorskip("triton")
    script = load_script()
    got = script.parse_sass(SASS)
    assert got["instructions"] == 5  # MOV, SHFL, HMMA, BRA, EXIT; the NOP is padding
    assert (got["SHFL"], got["HMMA"], got["BAR"], got["LDG"]) == (1, 1, 0, 0)
    assert got["loops"] == [3]  # 0x10-0x40: SHFL, HMMA, BRA (the NOP left out)
    usage = "Resource usage:\n Function _kernel:REG:64 STACK:16 SHARED:1024 LOCAL:0 CONSTANT[0]:556 TEXTURE:0"
    assert script.parse_resources(usage) == {"registers": 64, "stack_bytes": 16, "shared_bytes": 1024}
    with pytest.raises(ValueError, match="no STACK"):
        script.parse_resources("Function _kernel:REG:64 SHARED:0")


NESTED = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   IADD3 R2, R2, 0x1, RZ ;
        /*0020*/                   FADD R3, R3, R4 ;
        /*0030*/               @P0 BRA 0x20 ;
        /*0040*/                   LDG.E R5, [R6.64] ;
        /*0050*/               @P1 BRA 0x10 ;
        /*0060*/                   FMUL R3, R3, R5 ;
        /*0070*/               @P2 BRA 0x60 ;
        /*0080*/                   BRA 0x90 ;
        /*0090*/                   EXIT ;
        /*00a0*/                   BRA 0xa0;
"""


def test_loop_bodies_are_the_innermost_backward_branches():
    """Two innermost loops (0x20-0x30 inside 0x10-0x50, and 0x60-0x70); neither the outer
    loop, a forward branch nor the branch to itself after EXIT is one."""
    pytest.importorskip("triton")
    got = load_script().parse_sass(NESTED)
    assert got["instructions"] == 11
    assert got["loops"] == [2, 2]


TTGIR = """
#blocked = #ttg.blocked<{sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]}>
#mma = #ttg.nvidia_mma<{versionMajor = 2, versionMinor = 0, warpsPerCTA = [1, 4], instrShape = [16, 8]}>
module {
  tt.func public @k() {
    %a = tt.fp_to_fp %x : tensor<16x512xf8E4M3FN, #blocked> -> tensor<16x512xf32, #blocked> loc(#loc7)
    %b = tt.fp_to_fp %y : tensor<16x512xf8E4M3FN, #ttg.dot_op<{opIdx = 1, parent = #mma, kWidth = 4}>> -> tensor<16x512xf32, #ttg.dot_op<{opIdx = 1, parent = #mma, kWidth = 4}>> loc(#loc7)
    %c = arith.mulf %a, %a : tensor<16x512xf32, #blocked> loc(#loc8)
    %d = arith.mulf %p, %p : tensor<512x16xf32, #mma> loc(#loc8)
    %e = arith.addi %i, %i : tensor<16xi32, #blocked> loc(#loc9)
    %f = arith.addi %j, %j : tensor<16xi32, #mma> loc(#loc9)
    %g = ttg.convert_layout %a : tensor<16x512xf32, #blocked> -> tensor<16x512xf32, #mma> loc(#loc10)
    %h = ttg.convert_layout %g : tensor<16x512xf32, #mma> -> tensor<16x512xf32, #blocked> loc(#loc10)
    tt.return loc(#loc1)
  } loc(#loc)
} loc(#loc)
#loc = loc("/x/attention.py":50:0)
#loc1 = loc(unknown)
#loc2 = loc("/x/attention.py":74:12)
#loc3 = loc("/x/attention.py":210:20)
#loc4 = loc("/x/attention.py":90:8)
#loc5 = loc("/x/gate.py":12:3)
#loc6 = loc("/x/gate.py":30:3)
#loc7 = loc(callsite(#loc2 at #loc3))
#loc8 = loc("c"(#loc4))
#loc9 = loc(callsite(#loc5 at #loc6))
#loc10 = loc(#loc4)
"""


def test_layout_copies_are_one_op_of_one_shape_in_two_layouts():
    """The fp8 conversion at one call path in a blocked and a dot-operand layout is a copy,
    named by its innermost line; one multiply of two shapes is two values, a 16-element
    add is below the size that counts, and layout conversions are not computations."""
    pytest.importorskip("triton")
    script = load_script()
    assert script.layout_copies(TTGIR) == ["attention.py:74 x2"]
    assert script.layout_copies(TTGIR, min_elements=16) == ["attention.py:74 x2", "gate.py:12 x2"]


def test_a_bad_table_name_is_refused_before_compiling(capsys, tmp_path):
    """``--name`` takes a file stem; a path or an empty value is a one-line error (exit 1)."""
    pytest.importorskip("triton")
    script = load_script()
    for argv in (["--sass", "--out", str(tmp_path), "--name", "../elsewhere"], ["--sass", "--name"]):
        assert script.main(argv) == 1
        assert capsys.readouterr().out.strip() == "compile_sm90: --name needs a file stem (letters, digits, '_', '.', '-')"
    assert not any(tmp_path.iterdir())


def test_every_attention_table_row_fits_sm90_shared_memory_in_bf16_and_float32():
    """A tile that compiles may still not launch: float32 64-head tiles of 3 stages asked for
    270,592 bytes of shared memory and the H100 refused them (session 31); sm_90 allows
    232,448. Every launch the tile table makes at head dim 512 (mid and flash heads, every
    query bucket, engine and packed ring caches) fits, in bf16 and in float32, where the
    wide rows take fewer keys per tile (AttentionTile.float32_block_n)."""
    out = run_script("--table-shared")
    shared = {name: int(n) for name, n in re.findall(r"^ok (attention .*) \| shared (\d+)$", out, re.M)}
    script = load_script()
    launches = [name for name, *_ in script.table_launches(False) + script.table_launches(True)]
    assert sorted(shared) == sorted(launches) and len(launches) >= 16, out
    assert script.SM90_SHARED_BYTES == 232_448 and all(0 < n <= 232_448 for n in shared.values()), out
    # the 64-head rows' bf16 launches run on 64 keys, their float32 ones on 32 (named by the row, n64)
    wide = {name: n for name, n in shared.items() if " h64 " in name}
    assert len(wide) == 4 and all(" n64 " in name for name in wide), wide
    from runtime.kernels.attention_tiles import WIDE_TILES

    assert {tile.keys_per_tile(True) for tile in WIDE_TILES.values() if tile.block_h == 64} == {32}
