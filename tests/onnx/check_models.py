"""Every .onnx file in a folder passes Debian's python3-onnx checker (full_check: the graph,
the opset's type constraints and strict shape inference), and each case's <case>.dims.json
names the input dims that must be symbolic (dim_param): every other dim has a value.

    /usr/bin/python3 check_models.py CASES_DIR
"""
import json
import pathlib
import sys

import onnx


def check_dims(model, expected, path):
    graph_inputs = {i.name: i for i in model.graph.input}
    for name, info in graph_inputs.items():
        if name in {t.name for t in model.graph.initializer}:
            continue
        symbolic = set(expected.get(name, []))
        for axis, dim in enumerate(info.type.tensor_type.shape.dim):
            if axis in symbolic:
                assert dim.HasField("dim_param") and dim.dim_param, f"{path}: input {name} dim {axis} is not symbolic: {dim}"
            else:
                assert dim.HasField("dim_value"), f"{path}: input {name} dim {axis} has no value: {dim}"
    for name in expected:
        assert name in graph_inputs, f"{path}: no graph input {name} (inputs: {list(graph_inputs)})"


def main():
    folder = pathlib.Path(sys.argv[1])
    models = sorted(folder.glob("*.onnx"))
    assert models, f"no .onnx files in {folder}: run tg_onnx_tests with TG_ONNX_CASES_DIR={folder} first"
    for path in models:
        model = onnx.load(str(path))
        onnx.checker.check_model(model, full_check=True)
        assert model.opset_import[0].version == 17 and model.ir_version == 8, path
        dims = path.with_suffix(".dims.json")
        if dims.exists():
            check_dims(model, json.loads(dims.read_text()), path)
        print(f"ok {path.name}: {len(model.graph.node)} nodes, {len(model.graph.initializer)} initializers")


if __name__ == "__main__":
    main()
