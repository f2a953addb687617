"""The bad-input cases of shards and the data settings: checked whole before any trial."""
from tests import bad_input_files as files
from tests.bad_input_base import BAD, SMALL, Case, with_bytes, with_dir, with_shard

CASES = [
    Case("shard-cut-in-header", "5a", SMALL + ("data.url={T}/shard.tar",), BAD, "shard.tar", setup=with_shard(files.cut_in_header)),
    Case("shard-garbled-header", "5b", SMALL + ("data.url={T}/shard.tar",), BAD, "shard.tar", setup=with_shard(files.garbled_header)),
    Case("shard-cut-in-data", "5", SMALL + ("data.url={T}/shard.tar",), BAD, "shard.tar", setup=with_shard(files.cut_in_data)),
    Case("shard-empty-tar", "10c", SMALL + ("data.url={T}/shard.tar",), BAD, "shard.tar",
         setup=lambda ctx: files.empty_tar(ctx.T / "shard.tar")),
    Case("shard-zero-bytes", "10c", SMALL + ("data.url={T}/shard.tar",), BAD, "shard.tar", setup=with_bytes("shard.tar", b"")),
    Case("shard-not-a-tar", "intro", SMALL + ("data.url={T}/shard.tar",), BAD, "shard.tar",
         setup=with_bytes("shard.tar", b"just some text\n" * 64)),
    Case("shards-missing", "intro", SMALL + ("data.url=/nonexistent/shard-{0000..0003}.tar",), BAD, "data.url"),
    Case("shards-range-mistyped", "intro", SMALL + ("data.url={T}/x-{0000..9999999}.tar", "dry_run=true"), BAD, "data.url"),
    Case("data-url-not-ascii-unquoted", "audit", SMALL + ("data.url={T}/ü.tar",), BAD, "quote it: data.url='"),
    Case("data-url-a-directory", "9c", SMALL + ("data.url={T}/shards",), BAD, "data.url", setup=with_dir("shards")),
    Case("dali-mixed-without-a-gpu", "intro", ("data.loader=dali", "data.kind=images", "data.dali.decoder=mixed",
         "resources.gpus=0", "dry_run=true"), BAD, "data.dali.decoder"),
]
