"""The save helpers are built into every kernel the server starts, and follow the lab's ``[outputs]``
config: a real server, a real kernel, files read back from disk."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import numpy as np
import pytest
import tifffile
from mcp import Client

from _tests.support.isolation import make_settings
from _tests.support.results import output_of, text_of
from biopb_mcp.config.settings import load_settings
from biopb_mcp.errors import ConfigError
from biopb_mcp.server import build_server

HELPERS = ("out_path", "save_labels", "save_image", "save_table", "read_table", "show")

LAB = """
[outputs]
path = "{source_dir}/results/{stem}/{step}.{ext}"
names = ["nuclei-labels=labels.tif"]
table_delimiter = ";"
decimal_mark = ","
"""


@pytest.mark.anyio
async def test_a_fresh_kernel_has_the_helpers_and_they_follow_the_labs_layout_and_table_format(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, LAB)
    raw = tmp_path / "data" / "plate1_A01.ome.tif"
    raw.parent.mkdir()
    tifffile.imwrite(raw, np.zeros((8, 8), np.uint16))
    mcp, state = build_server(settings)

    async def run(client: Client, code: str) -> str:
        result = await client.call_tool("execute_code", {"code": code})
        assert not result.is_error, text_of(result)
        return output_of(result)

    try:
        with anyio.fail_after(120):
            async with Client(mcp) as client:
                await client.call_tool("start_kernel", {})
                status = json.loads(text_of(await client.call_tool("server_status", {})))
                plugins = status["kernel"]["plugins"]
                assert set(HELPERS) <= set(plugins["built_in"]), plugins
                assert plugins["loaded"] == []  # the lab's own plugins: none here
                doc = text_of(await client.call_tool("inspect_object", {"path": "save_table"}))
                assert "delimiter" in doc and "DataFrame" in doc and "read_table" in doc, doc
                assert "user_name" in text_of(await client.call_tool("inspect_object", {"path": "out_path"}))

                await run(
                    client,
                    f"source_path = {str(raw)!r}\n"
                    "import numpy as np\n"
                    "labels = np.zeros((6, 7), np.int64); labels[1:3, 1:4] = 1; labels[4:6, 2:7] = 70000\n"
                    "a = save_labels(labels, 'nuclei-labels', pixel_size_um=(None, 0.325, 0.325))\n"
                    "b = save_table({'label': [1, 2], 'area_um2': [2.5, 10.125], 'kind': ['a', 'b']}, 'measure')\n"
                    "c = save_image(np.ones((2, 6, 7)), 'flatfield', pixel_size_um=(2.0, 0.5, 0.5), axes='ZYX')\n"
                    "t = read_table(b)\n"
                    "print(a); print(b); print(c); print(t['area_um2'].tolist(), t['label'].tolist(), t['kind'].tolist())",
                )
                folder = raw.parent / "results" / "plate1_A01"
                labels_file, table_file, image_file = (
                    folder / "labels.tif",
                    folder / "measure.csv",
                    folder / "flatfield.tif",
                )
                saved = tifffile.imread(labels_file)
                assert saved.dtype == np.uint32 and int(saved.max()) == 70000  # past uint16: not wrapped
                with tifffile.TiffFile(labels_file) as tf:
                    assert 'PhysicalSizeX="0.325"' in (tf.ome_metadata or "")
                with tifffile.TiffFile(image_file) as tf:
                    meta = tf.ome_metadata or ""
                    assert 'PhysicalSizeZ="2.0"' in meta and 'PhysicalSizeX="0.5"' in meta
                    assert tf.series[0].axes == "ZYX" and tf.series[0].dtype == np.float32
                assert table_file.read_text(encoding="utf-8").splitlines() == [
                    "label;area_um2;kind",
                    "1;2,5;a",
                    "2;10,125;b",
                ]
                out = await run(client, "print(read_table(b)['area_um2'].tolist())")
                assert out.strip() == "[2.5, 10.125]"
                # a pandas DataFrame is a table too (its index is not written)
                await run(
                    client, "import pandas as pd\nsave_table(pd.DataFrame({'a': [1.5], 'b': ['x']}, index=[7]), 'df')"
                )
                assert (folder / "df.csv").read_text(encoding="utf-8") == "a;b\n1,5;x\n"

                # a lab (or the agent) redefining out_path moves every save, the helpers included
                await run(
                    client,
                    f"def out_path(step, ext, user_name=None):\n"
                    f"    return __import__('pathlib').Path({str(tmp_path / 'elsewhere')!r}) / f'{{step}}.{{ext}}'\n"
                    "__import__('os').makedirs(out_path('x', 'y').parent, exist_ok=True)\n"
                    "save_table({'n': [3]}, 'count')",
                )
                assert (tmp_path / "elsewhere" / "count.csv").read_text(encoding="utf-8") == "n\n3\n"
                # a variable named out_path (a procedure's zarr target) is not a rule: saves follow the config
                await run(client, "out_path = 'labels.zarr'\nsave_table({'n': [4]}, 'count2')")
                assert (folder / "count2.csv").is_file()
                # %reset empties the namespace; the helpers come back for the next cell
                await run(client, "%reset -f")
                assert (await run(client, "print(callable(save_labels), callable(out_path))")).strip() == "True True"
                # bad input: a clear error, nothing written
                result = await client.call_tool("execute_code", {"code": "save_labels(np.ones((3, 3)), 'x')"})
                assert "NameError" in text_of(result)  # np is gone after the reset
                result = await client.call_tool(
                    "execute_code",
                    {"code": "import numpy as np\nsave_labels(np.ones((3, 3), int), 'x')"},
                )
                assert "OutputsError" in text_of(result) and "source_path" in text_of(result)
                result = await client.call_tool(
                    "execute_code",
                    {"code": f"source_path = {str(raw)!r}\nsave_labels(np.ones((3, 3)) * 0.5, 'x')"},
                )
                assert "integer array" in text_of(result)
                assert not (folder / "x.tif").exists()
    finally:
        state.kernel.shutdown()


@pytest.mark.parametrize(
    ("toml", "words"),
    [
        ('path = "{source_dir}/results/{sample}_{step}.{ext}"', "{sample}"),
        ('path = "{source_dir}/results/{stem}.tif"', "{step} and {ext}"),
        ('names = ["labels.tif"]', "step=file name"),
        ('table_delimiter = ","\ndecimal_mark = ","', "cannot also be the table delimiter"),
        ('table_delimiter = "|"', "must be one of"),
    ],
)
def test_a_bad_outputs_section_is_refused_naming_the_key(tmp_path: Path, toml: str, words: str) -> None:
    config = tmp_path / "cfg"
    config.mkdir()
    (config / "config.toml").write_text("[outputs]\n" + toml + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="outputs") as caught:
        load_settings(config)
    assert words in str(caught.value)
