"""A real S3 API on 127.0.0.1: moto's server, with this process's AWS settings pointed at it.

Object stores differ from a local disk in what matters to a shared run (no rename, eventual
listings, every read a request), so remote runs are tested against an S3 server, reached by
s3fs over HTTP exactly as a bucket on AWS would be. Child processes started while it is up
(Ray workers) inherit the settings.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from require import missing_modules, require

MODULES = ("s3fs", "moto", "flask", "flask_cors")


@dataclass(frozen=True)
class S3:
    endpoint: str

    def bucket(self) -> str:
        """A new, empty bucket."""
        import s3fs

        name = f"biasscope-{uuid.uuid4().hex[:10]}"
        s3fs.S3FileSystem().mkdir(name)
        return name


def available() -> bool:
    """Whether the S3 tests should run: their modules are here, or CI demands them."""
    return os.environ.get("BIASSCOPE_REQUIRE_S3") == "1" or not missing_modules(*MODULES)


def require_s3() -> None:
    require(missing_modules(*MODULES), "BIASSCOPE_REQUIRE_S3", "pip install -e '.[dev]'")


@contextmanager
def moto_s3() -> Iterator[S3]:
    require_s3()
    import s3fs
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _, port = server.get_host_and_port()
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        yield S3(env["AWS_ENDPOINT_URL"])
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        s3fs.S3FileSystem.clear_instance_cache()
        server.stop()
