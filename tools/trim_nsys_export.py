"""Copy an Nsight Systems SQLite export keeping only the tables estimator/profile/nsys_sqlite.py reads
(and dropping the capture machine's environment table), then VACUUM it: a small test fixture with the
genuine schema and rows.

    python -m tools.trim_nsys_export IN.sqlite OUT.sqlite

NB: the rows of the kept tables are untouched; StringIds keeps every string (kernel and NVTX names
point into it).
"""

from __future__ import annotations

import shutil
import sqlite3
import sys

KEEP = {
    "META_DATA_EXPORT",
    "EXPORT_META_DATA",
    "StringIds",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "NVTX_EVENTS",
    "TARGET_INFO_GPU",
}


def trim(src: str, dst: str) -> None:
    shutil.copyfile(src, dst)
    db = sqlite3.connect(dst)
    tables = [r[0] for r in db.execute("select name from sqlite_master where type='table'")]
    for t in tables:
        if t not in KEEP and not t.startswith("sqlite_"):
            db.execute(f'drop table "{t}"')
    db.commit()
    db.execute("vacuum")
    db.close()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    trim(sys.argv[1], sys.argv[2])
