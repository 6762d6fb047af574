"""nmtfrag: adapt NMT to confidential data (phrase-pair fragmentation, DP, audit).

Install with `bash scripts/install.sh`: fairseq-fixed and fastBPE must be built without
build isolation against the torch already installed (see that script for why).
"""
from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """Compiled helpers are optional: without Cython or a C compiler, nmtfrag uses its
    pure-Python versions (same output, slower), so the install must not fail."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any build failure means "use Python"
            print(f"nmtfrag: optional C extension not built ({exc}); using pure Python")

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            print(f"nmtfrag: {ext.name} not built ({exc}); using pure Python")


def extensions():
    """nmtfrag.fragment._phrases_fast (phrase extraction's inner loop), if Cython is present."""
    try:
        from Cython.Build import cythonize
    except ImportError:
        return []
    return cythonize([Extension("nmtfrag.fragment._phrases_fast", ["nmtfrag/fragment/_phrases_fast.pyx"])],
                     language_level=3, quiet=True)


setup(
    name="nmtfrag",
    version="0.1.0",
    description="Adapt neural machine translation to confidential data: "
                "phrase-pair releases, differential privacy, confidentiality audits",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="MIT",
    python_requires=">=3.10",
    packages=find_packages(include=["nmtfrag", "nmtfrag.*"]),
    install_requires=[
        # fairseq 0.12.2 does not import on Python 3.11; this fork does.
        "fairseq-fixed==0.12.3.1",
        "fastbpe==0.1.0",
        "torch>=2.0",
        "eflomal==2.0.0",
        "sacremoses>=0.1",
        "sacrebleu>=2.3,<3",
        "subword-nmt>=0.3.8",
        "opacus==1.6.0",
        "numpy",
        "tqdm",
        "matplotlib",
        "tomli>=1.1; python_version < '3.11'",  # study configs (tomllib from 3.11)
        "pyyaml",
        "scipy",  # audit exposure: skew-normal extrapolation
    ],
    extras_require={
        # mypy: tests/test_static_types.py (configured in pyproject.toml; checked with 2.4)
        "test": ["pytest", "hypothesis", "dp-accounting", "mypy>=2.4,<3"],
        # `--engine ctranslate2` for evaluate/translate (nmtfrag/translate/ct2_engine.py)
        "ct2": ["ctranslate2==4.8.5"],
        # the docs site: `mkdocs serve` with mkdocs.yml (checked with mkdocs-material 9.8;
        # brings mkdocs and pymdown-extensions); CI does not install it
        "docs": ["mkdocs-material>=9.5,<10"],
    },
    entry_points={"console_scripts": ["nmtfrag=nmtfrag.cli:main"]},
    ext_modules=extensions(),
    cmdclass={"build_ext": OptionalBuildExt},
)
