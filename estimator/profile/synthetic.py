"""Write a synthetic Nsight Systems SQLite export (schema 3.x layout, the tables nsys_sqlite reads): for
tests of the join and for the reader's benchmark (tools/bench_profile.py). Not a capture of anything."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

PID = 4242 << 24  # globalPid / globalTid carry the process in bits 24+
TID = PID + 7


@dataclass(frozen=True)
class Launch:
    name: str
    start_ns: int
    duration_ns: int
    launch_ns: int | None = None  # start of the cudaLaunchKernel call; None: no runtime record
    stream: int = 7
    device: int = 0
    nvtx: str | None = None  # a push/pop range around the launch call
    grid: tuple[int, int, int] = (132, 1, 1)
    block: tuple[int, int, int] = (128, 1, 1)


def write(
    path: str,
    launches: Iterable[Launch],
    gpu_name: str = "NVIDIA H100 80GB HBM3",
    dram_bytes_per_s: int = 3_352_320_000_000,
    schema: str = "3.16.1",
) -> int:
    """Write the export; returns the number of kernels."""
    db = sqlite3.connect(path)
    db.executescript("""
        create table META_DATA_EXPORT(name text, value text);
        create table StringIds(id integer primary key, value text);
        create table CUPTI_ACTIVITY_KIND_KERNEL(start int, end int, deviceId int, contextId int,
            streamId int, correlationId int, globalPid int, demangledName int, shortName int,
            mangledName int, gridX int, gridY int, gridZ int, blockX int, blockY int, blockZ int,
            registersPerThread int, staticSharedMemory int, dynamicSharedMemory int);
        create table CUPTI_ACTIVITY_KIND_RUNTIME(start int, end int, eventClass int, globalTid int,
            correlationId int, nameId int, returnValue int, callchainId int);
        create table NVTX_EVENTS(start int, end int, eventType int, rangeId int, category int, color int,
            text text, globalTid int, endGlobalTid int, textId int, domainId int);
        create table TARGET_INFO_GPU(id int, name text, computeMajor int, computeMinor int, smCount int,
            memoryBandwidth int, clockRate int, l2CacheSize int);
    """)
    db.execute("insert into META_DATA_EXPORT values ('EXPORT_SCHEMA_VERSION', ?)", (schema,))
    db.execute(
        "insert into TARGET_INFO_GPU values (0, ?, 9, 0, 132, ?, 1980000000, 52428800)",
        (gpu_name, dram_bytes_per_s),
    )
    strings: dict[str, int] = {"cudaLaunchKernel_v7000": 1}
    kernels, runtime, nvtx = [], [], []
    for cid, la in enumerate(launches, start=1):
        sid = strings.setdefault(la.name, len(strings) + 1)
        kernels.append(
            (
                la.start_ns,
                la.start_ns + la.duration_ns,
                la.device,
                1,
                la.stream,
                cid,
                PID,
                sid,
                sid,
                sid,
                *la.grid,
                *la.block,
                32,
                0,
                0,
            )
        )
        if la.launch_ns is not None:
            runtime.append((la.launch_ns, la.launch_ns + 2000, 1, TID, cid, 1, 0, 0))
            if la.nvtx is not None:
                nvtx.append(
                    (la.launch_ns - 100, la.launch_ns + 3000, 59, None, 0, 0, la.nvtx, TID, TID, None, 0)
                )
    db.executemany("insert into StringIds values (?, ?)", [(i, s) for s, i in strings.items()])
    db.executemany(f"insert into CUPTI_ACTIVITY_KIND_KERNEL values ({', '.join('?' * 19)})", kernels)
    db.executemany(f"insert into CUPTI_ACTIVITY_KIND_RUNTIME values ({', '.join('?' * 8)})", runtime)
    db.executemany(f"insert into NVTX_EVENTS values ({', '.join('?' * 11)})", nvtx)
    db.commit()
    db.close()
    return len(kernels)
