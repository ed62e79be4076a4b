"""The ``tiny`` preset's model: a Qwen2-style causal LM of a few million parameters and its tokenizer.

Nothing is downloaded. The tokenizer is a byte-level BPE trained at build time, deterministically, on the
small corpus shipped in ``assets/tiny_corpus.json`` (Python programs in the style of AZR tasks plus the
kind of instruction text the prompts use). It uses the Qwen2 pre-tokenization pipeline (NFC, the Qwen2
split regex, byte-level) so that ``AutoTokenizer`` -- which maps ``model_type: qwen2`` to the Qwen2
tokenizer class -- loads it unchanged: the tiny model goes through the same loading code as a real one.
The weights are a random initialisation under a fixed seed.

The build is cached: a directory that already holds a build with the same fingerprint (corpus, tokenizer
and model settings, library versions) is reused as is. A fresh build is written to a temporary sibling and
renamed into place, so concurrent builders never see a half-written model.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

import tokenizers
import torch
import transformers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

log = logging.getLogger(__name__)

PAD_TOKEN = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = (PAD_TOKEN, IM_START, IM_END)
# The format tags of the AZR prompts: single tokens so that a tiny model can learn the format quickly.
FORMAT_TOKENS = ("<think>", "</think>", "<answer>", "</answer>")
# The split pattern of the Qwen2 tokenizer (letters, single digits, punctuation runs, whitespace runs).
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
MARKER = "azr-tiny-build.json"


@dataclass(frozen=True, slots=True)
class TinySpec:
    """Sizes of the tiny model (3.4 M parameters with the shipped corpus); ``warm_start.tiny`` sets them."""

    vocab_size: int = 2048
    """Upper bound for the BPE vocabulary; the small corpus yields fewer merges than this."""
    hidden_size: int = 256
    intermediate_size: int = 768
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 4096
    seed: int = 0
    """Seed of the random initialisation."""

    def __post_init__(self) -> None:
        sizes = {name: value for name, value in asdict(self).items() if name != "seed"}
        if not_positive := [name for name, value in sizes.items() if value < 1]:
            raise ValueError(f"the tiny model's sizes must be positive: {', '.join(not_positive)}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} is not a multiple of "
                f"num_attention_heads {self.num_attention_heads}"
            )
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads {self.num_attention_heads} is not a multiple of "
                f"num_key_value_heads {self.num_key_value_heads}"
            )


BASE_DIR = Path("models") / "tiny"
"""Where, under the cache directory, the tiny model of the default sizes lives."""


def tiny_model_dir(cache_dir: Path, spec: TinySpec) -> Path:
    """The tiny model's directory under ``cache_dir``: ``models/tiny`` for the default sizes, a sibling named
    for the sizes that differ otherwise (``tiny-hidden_size384-...``), so that building one size never
    replaces another's cached build."""
    default = asdict(TinySpec())
    changed = [f"{name}{value}" for name, value in asdict(spec).items() if value != default[name]]
    return cache_dir / BASE_DIR.with_name("-".join(["tiny", *changed]))


def corpus() -> list[str]:
    """The shipped tokenizer corpus: a JSON list of documents."""
    text = resources.files("azr.trainer").joinpath("assets/tiny_corpus.json").read_text(encoding="utf-8")
    docs = json.loads(text)
    if not isinstance(docs, list) or not all(isinstance(d, str) for d in docs):
        raise ValueError("assets/tiny_corpus.json must be a JSON list of strings")
    return docs


def fingerprint(spec: TinySpec) -> str:
    """Content hash of everything that determines the build."""
    h = hashlib.sha256()
    for part in (
        json.dumps(corpus()),
        json.dumps(asdict(spec), sort_keys=True),
        CHAT_TEMPLATE,
        QWEN2_SPLIT,
        torch.__version__,
        transformers.__version__,
        tokenizers.__version__,
    ):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def train_tokenizer(spec: TinySpec) -> Tokenizer:
    """Byte-level BPE on the shipped corpus, with the Qwen2 normalizer and pre-tokenizer."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in FORMAT_TOKENS])
    return tok


def _write(target: Path, spec: TinySpec) -> None:
    from transformers import AutoTokenizer, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    raw = train_tokenizer(spec)
    hf_tok = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=raw,
        eos_token=IM_END,
        pad_token=PAD_TOKEN,
        additional_special_tokens=[IM_START],
        chat_template=CHAT_TEMPLATE,
        model_max_length=spec.max_position_embeddings,
    )
    config = Qwen2Config(
        vocab_size=len(hf_tok),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=True,
        pad_token_id=hf_tok.pad_token_id,
        eos_token_id=hf_tok.eos_token_id,
        bos_token_id=None,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = hf_tok.pad_token_id
    model.generation_config.eos_token_id = hf_tok.eos_token_id
    model.save_pretrained(target)
    hf_tok.save_pretrained(target)
    _check_loaded_tokenizer(AutoTokenizer.from_pretrained(target), raw)


def _check_loaded_tokenizer(loaded: transformers.PreTrainedTokenizerBase, raw: Tokenizer) -> None:
    """The tokenizer that ``AutoTokenizer`` builds must encode exactly like the one we trained."""
    for doc in corpus():
        if loaded.encode(doc, add_special_tokens=False) != raw.encode(doc, add_special_tokens=False).ids:
            raise RuntimeError(
                "AutoTokenizer loads the tiny tokenizer with a different pipeline than it was trained with; "
                "align train_tokenizer() with the tokenizer class transformers maps qwen2 to"
            )


def build_tiny_model(directory: Path, spec: TinySpec | None = None) -> Path:
    """Build (or reuse) the tiny model and tokenizer in ``directory``; returns ``directory``.

    The result is a Hugging Face model directory: ``AutoModelForCausalLM.from_pretrained(directory)`` and
    ``AutoTokenizer.from_pretrained(directory)`` load it.
    """
    spec = spec or TinySpec()
    directory = Path(directory)
    want = fingerprint(spec)
    if _built_fingerprint(directory) == want:
        return directory
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}-", dir=directory.parent))
    try:
        tmp.chmod(0o755)  # mkdtemp makes it private; the model is for every local user
        _write(tmp, spec)
        (tmp / MARKER).write_text(json.dumps({"fingerprint": want, "spec": asdict(spec)}, indent=1))
        if directory.exists():
            shutil.rmtree(directory)
        tmp.rename(directory)
        log.info("built the tiny model in %s", directory)
    except OSError:
        # Another process renamed its build into place first; use it if it is the same build.
        if _built_fingerprint(directory) != want:
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return directory


def _built_fingerprint(directory: Path) -> str | None:
    try:
        data = json.loads((directory / MARKER).read_text())
    except (OSError, ValueError):
        return None
    value = data.get("fingerprint") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None
