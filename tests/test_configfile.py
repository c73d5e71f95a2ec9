"""Configuration files: YAML and JSON read alike, and every problem of a configuration reported
at once — one line each naming the file, the line, the dotted field and what was expected; an
unknown key as unknown (with the closest known field of its section), also inside nested
sections (``lora:``, ``trl_args:``, ``prover:``, ``models[...]``), never a library's TypeError —
in Python and on the command line."""

from __future__ import annotations

import pytest

from leanloop.configfile import ConfigError, config_lines, read_config_file
from leanloop.errors import DataFormatError
from tests.helpers import run_cli


def test_yaml_json_and_errors(tmp_path):
    (tmp_path / "a.yaml").write_text("lr: 0.001\nsplits:\n  val: 5\n")
    (tmp_path / "a.json").write_text('{"lr": 0.001, "splits": {"val": 5}}')
    assert read_config_file(tmp_path / "a.yaml") == read_config_file(tmp_path / "a.json")
    (tmp_path / "empty.yaml").write_text("")
    assert read_config_file(tmp_path / "empty.yaml") is None
    (tmp_path / "bad.yaml").write_text("lr: 1\nsplits: [1, 2\n")
    with pytest.raises(DataFormatError) as err:
        read_config_file(tmp_path / "bad.yaml")
    assert err.value.path.endswith("bad.yaml") and err.value.line is not None
    with pytest.raises(DataFormatError, match="does not exist"):
        read_config_file(tmp_path / "absent.yaml")


def test_lines_of_keys_and_items(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("a: 1\nlist:\n  - {name: x, v: 2}\n  - name: y\n    v: 3\n")
    lines = config_lines(path)
    assert lines[("a",)] == 1 and lines[("list",)] == 2
    assert lines[("list", 0)] == 3 and lines[("list", 0, "v")] == 3
    assert lines[("list", 1, "v")] == 5
    (tmp_path / "c.json").write_text('{\n  "a": 1,\n  "b": {\n    "c": 2\n  }\n}\n')
    assert config_lines(tmp_path / "c.json")[("b", "c")] == 4
    assert config_lines(tmp_path / "absent.yaml") == {}


def problems(error: ConfigError) -> list[tuple[int | None, str | None, str, str | None]]:
    return [(p.line, p.field, p.problem, p.hint) for p in error.problems]


SFT = """\
model_nam: tinycoder
output_dir: out
batch_size: zero
lora:
  r: 16
  lora_alph: 32
trl_args:
  lerning_rate: 0.1
  max_length: 64
"""


def test_every_problem_of_a_trainer_file_at_once(tmp_path):
    from leanloop.trainer.sft_config import SFTTrainerConfig

    path = tmp_path / "sft.yaml"
    path.write_text(SFT)
    with pytest.raises(ConfigError) as caught:
        SFTTrainerConfig.from_yaml(path)
    assert problems(caught.value) == [
        # the misspelt required field is said once, as unknown (not as a missing one)
        (1, "model_nam", "unknown field", "did you mean 'model_name'?"),
        (
            3,
            "batch_size",
            "Input should be a valid integer, unable to parse string as an integer (got 'zero')",
            None,
        ),
        (6, "lora.lora_alph", "unknown field", "did you mean 'lora_alpha'?"),
        (8, "trl_args.lerning_rate", "unknown field", "did you mean 'learning_rate'?"),
    ]
    lines = str(caught.value).splitlines()
    assert len(lines) == 4
    assert lines[2] == (
        f"{path}, line 6, field 'lora.lora_alph': unknown field (did you mean 'lora_alpha'?)"
    )
    # the error's own message is the first problem, saying how many more there are
    assert caught.value.message.endswith("unknown field (and 3 more problems)")


def test_trl_arguments_are_checked_against_the_trainers_own_trl_class(tmp_path):
    from leanloop.trainer.grpo_config import GRPOTrainerConfig
    from leanloop.trainer.sft_config import SFTTrainerConfig

    # max_length is SFT's, num_iterations GRPO's: each trainer takes its own
    assert SFTTrainerConfig(model_name="m", trl_args={"max_length": 64}).trl_args
    assert GRPOTrainerConfig(model_name="m", trl_args={"num_iterations": 2}).trl_args
    with pytest.raises(ConfigError) as caught:
        SFTTrainerConfig(model_name="m", trl_args={"num_iterations": 2})
    assert problems(caught.value) == [
        (None, "trl_args.num_iterations", "unknown field", caught.value.problems[0].hint)
    ]
    path = tmp_path / "grpo.yaml"
    path.write_text("model_name: m\ntrl_args:\n  beta: 0.1\n  num_generatons: 4\n")
    with pytest.raises(ConfigError) as caught:
        GRPOTrainerConfig.from_yaml(path)
    assert problems(caught.value) == [
        (4, "trl_args.num_generatons", "unknown field", "did you mean 'num_generations'?")
    ]


def test_lora_values_peft_refuses_are_reported_when_the_file_is_read(tmp_path):
    from leanloop.trainer.sft_config import SFTTrainerConfig

    path = tmp_path / "sft.yaml"
    path.write_text("model_name: m\nlora: {r: 8, layers_pattern: layers}\n")
    with pytest.raises(ConfigError) as caught:
        SFTTrainerConfig.from_yaml(path)
    ((line, field, problem, _),) = problems(caught.value)
    assert (line, field) == (2, "lora")
    assert problem.startswith("peft.LoraConfig refuses these values: ")
    assert "layers_to_transform" in problem
    assert SFTTrainerConfig(model_name="m", lora={"r": 8, "lora_alpha": 16}).lora == {
        "r": 8,
        "lora_alpha": 16,
    }


def test_sections_of_the_lean_agent_file_are_reported_together(tmp_path):
    from leanloop.agent.lean_agent import LeanAgentConfig

    path = tmp_path / "agent.yaml"
    path.write_text(
        "repositories:\n"
        "  - {dataset: d, commit: abc}\n"
        "training:\n"
        "  lrr: 0.1\n"
        "prover:\n"
        "  timeout: -1\n"
        "  num_sample_tactics: 4\n"
        "databse: x.db\n"
    )
    with pytest.raises(ConfigError) as caught:
        LeanAgentConfig.from_yaml(path)
    assert problems(caught.value) == [
        (2, "repositories[0]", "commit goes with url, and url needs a commit", None),
        (4, "training.lrr", "unknown field", "did you mean 'lr'?"),
        (6, "prover.timeout", "Input should be greater than 0 (got -1)", None),
        (7, "prover.num_sample_tactics", "unknown field", "did you mean 'num_sampled_tactics'?"),
        (8, "databse", "unknown field", "did you mean 'database'?"),
    ]


def test_the_server_configuration_names_models_and_nested_sections(tmp_path):
    from leanloop.serve import ServeConfig

    path = tmp_path / "models.yaml"
    path.write_text(
        "models:\n"
        "  - name: sft\n"
        "    provider: hf\n"
        "    model: out/sft\n"
        "    decoding: {metod: beam, num_beams: 0}\n"
        "  - {name: gpt, provider: openai, model: m, tiemout: 3}\n"
        "lean:\n"
        "  projct: ~/p\n"
        "prot: 80\n"
    )
    with pytest.raises(ConfigError) as caught:
        ServeConfig.load(path)
    assert problems(caught.value) == [
        (
            5,
            "models[sft].decoding.num_beams",
            "Input should be greater than or equal to 1 (got 0)",
            None,
        ),
        (5, "models[sft].decoding.metod", "unknown field", "did you mean 'method'?"),
        (6, "models[gpt].tiemout", "unknown field", "did you mean 'timeout'?"),
        (8, "lean.projct", "unknown field", "did you mean 'project'?"),
        (9, "prot", "unknown field", "did you mean 'port'?"),
    ]


def test_a_benchmark_prompt_section_and_a_json_file(tmp_path):
    from leanloop.prover.benchmark_config import BenchmarkConfig

    path = tmp_path / "bench.json"
    path.write_text('{\n  "samples": 0,\n  "prompt": {\n    "styel": "chat"\n  }\n}\n')
    with pytest.raises(ConfigError) as caught:
        BenchmarkConfig.load(path)
    fields = [(p.line, p.field, p.problem) for p in caught.value.problems]
    assert (2, "samples", "Input should be greater than or equal to 1 (got 0)") in fields
    assert (4, "prompt.styel", "unknown field") in fields


def test_a_missing_field_says_what_was_expected():
    from leanloop.trainer.sft_config import SFTTrainerConfig

    with pytest.raises(ConfigError) as caught:
        SFTTrainerConfig.from_dict({"batch_size": 2}, "sft.yaml")
    ((line, field, problem, hint),) = problems(caught.value)
    assert (line, field, problem) == (None, "model_name", "the field is missing")
    assert hint is not None and hint.startswith("expected: the model to train")


@pytest.mark.parametrize(
    ("argv", "text", "expected"),
    [
        (
            ["train", "sft", "--db", "{tmp}/none.db"],
            "model_name: tinycoder\nlora: {lora_alph: 32}\nmax_lenght: 8\n",
            [
                "line 2, field 'lora.lora_alph': unknown field; hint: did you mean 'lora_alpha'?",
                "line 3, field 'max_lenght': unknown field; hint: did you mean 'max_length'?",
            ],
        ),
        (
            ["prove", "--dataset", "{tmp}", "--replay"],
            "timeout: 0\nnum_sample_tactics: 4\n",
            [
                "line 1, field 'timeout': Input should be greater than 0 (got 0)",
                "line 2, field 'num_sample_tactics': unknown field; hint: did you mean "
                "'num_sampled_tactics'?",
            ],
        ),
        (
            ["serve"],
            "models:\n  - {name: a, provider: hf, model: m, decoding: {batch_sise: 2}}\nprot: 1\n",
            [
                "line 2, field 'models[a].decoding.batch_sise': unknown field; hint: did you "
                "mean 'batch_size'?",
                "line 3, field 'prot': unknown field; hint: did you mean 'port'?",
            ],
        ),
        (
            ["run"],
            "retriever_secnds: 10\nlora_r: 0\n",
            [
                "line 1, field 'retriever_secnds': unknown field; hint: did you mean "
                "'retriever_seconds'?",
                "line 2, field 'lora_r': Input should be greater than or equal to 1 (got 0)",
            ],
        ),
        (
            ["db", "stats"],
            "jsn: true\njson: maybe\n",
            [
                "line 1, field 'jsn': unknown option; hint: did you mean 'json'?",
                "line 2, field 'json': Input should be a valid boolean",
            ],
        ),
    ],
)
def test_the_command_line_says_each_problem_in_one_line(capsys, tmp_path, argv, text, expected):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, out, err = run_cli(capsys, *argv, "--config", path)
    assert code == 1 and "Traceback" not in err and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == len(expected), err
    for line, wanted in zip(lines, expected, strict=True):
        assert line.startswith(f"error: {path}, {wanted}"), (line, wanted)
