#!/usr/bin/env python3
"""tuspyserver (FastAPI, from PyPI, pinned and installed by .ci/run) behind
uvicorn, for tus_proxy.js: `python3 tuspy_app.py PORT FOLDER [MAX_SIZE]`
serves tus at /files/ on 127.0.0.1:PORT, its uploads in FOLDER, until it
is stopped (SIGTERM)."""
import sys

import uvicorn
from fastapi import FastAPI
from tuspyserver import create_tus_router

port, folder = int(sys.argv[1]), sys.argv[2]
options = {"max_size": int(sys.argv[3])} if len(sys.argv) > 3 and sys.argv[3] else {}
app = FastAPI()
app.include_router(create_tus_router(prefix="files", files_dir=folder, **options))
uvicorn.run(app, host="127.0.0.1", port=port, log_level="error")
