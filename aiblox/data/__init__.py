"""Datasets: loading (BEIR folders, CSV/TSV/parquet files, manifests, DataFrames), validation
with precise errors, and a content hash.

Layout: ``corpus.jsonl`` (or ``corpus.jsonl.gz``) with ``{"_id", "title", "text"}`` per line,
``queries.jsonl`` with ``{"_id", "text"}``, ``qrels/<split>.tsv`` with a
``query-id<TAB>corpus-id<TAB>score`` header (or TREC qrels, below), and optionally
``answers.jsonl`` (SQuAD-style gold answer spans: ``{"_id", "corpus-id", "answers",
"answer_starts"}``).

Derived splits: ``<split>:<i>/<n>`` (e.g. ``test:0/2`` and ``test:1/2``) is the part ``i`` of a
deterministic hash partition of ``<split>`` into ``n`` parts: the queries whose
``int(sha256(query_id), 16) % n == i``, with their qrels. Parts are disjoint and cover the split,
so a dataset with one judged split (``squad-v1.1-dev``) can be tuned on one part and reported on
another. ``available_splits`` lists files only; any ``<file split>:<i>/<n>`` with
``0 <= i < n`` and ``n >= 2``, written in the digits 0-9 without a leading zero (one name per
part: ``test:00/2`` is refused), loads, and a dataset loaded with the file split gives its
parts too (:meth:`Dataset.split_qrels`).

Qrels layouts, detected per file from its first line: BEIR's three tab-separated columns
``query-id<TAB>corpus-id<TAB>score`` with or without that header, or TREC's four
whitespace-separated columns ``query-id iteration corpus-id relevance`` (no header; the
iteration column is ignored). Every line of a file must have the file's layout; a line that
does not (or a first line that is neither) is an error naming it. A file with BEIR's header
is hashed as its bytes; one without it (BEIR rows alone, TREC's columns) as the BEIR file of its
rows written one way (the header, then ``query-id<TAB>corpus-id<TAB>grade`` lines in file
order, ids trimmed, whole-number grades, LF line ends, as a CSV table is), so the same
judgments give the same dataset hash in every layout when the file with the header is written
that way, and another when it is not (``2.0`` grades, CRLF, padded ids, a byte-order mark).

Grades are integers (``2`` or ``2.0``, in the ASCII digits trec_eval reads) in
``[-1000, 1000]``; a non-integer (``1.9``), a non-finite (``inf``, ``nan``), one in other
digits (fullwidth, Arabic-Indic) or a larger one is an error. Grades below 1 are judged
non-relevant, as in ranx and trec_eval (ranx counts a document relevant when its grade is at
least 1), so TREC's negative grades (``-1``, ``-2`` for junk and spam in the Web tracks) load
and count as non-relevant; bpref (trec_eval's) judges non-relevant only grades 0 up to the
relevance level, a negative grade counting there as unjudged, as in trec_eval. Every
ranx metric stays finite up to the bound (``ndcg_burges``'s gain is ``2^grade - 1``).

Ids, one rule in every layout (corpus, queries, qrels and answers; BEIR and TREC files, CSV,
TSV, parquet, JSONL, DataFrames) and in TREC run files (:mod:`aiblox.data.trec`): an id is its
text without surrounding whitespace (``" d1 "`` is ``d1``, as a whitespace-separated TREC line
gives it), so a corpus, its qrels and a run written from it name a document alike. An empty id,
or one holding whitespace inside (which no TREC run or qrels line can carry: trec_eval splits
lines on whitespace), is an error naming the file, line and field; two ids equal under the rule
are duplicates (an error naming both). Integer ids are their decimal text. A BEIR file's hash
is its bytes and a table's hash its rows' BEIR lines (ids as the rule gives them), so the rule
moves no hash of a dataset whose ids have no surrounding whitespace.

Bad input raises :class:`DatasetError` naming the file, the line and the field: malformed JSON
or UTF-8, lone surrogates (``"\\ud800"`` escapes, which are not Unicode text), NUL characters
and non-finite numbers in any JSON field, an empty corpus, a qrels file with no judgment or no
relevant one, two different grades for one (query, document) pair (naming both lines), a file
that is not a regular file (a device such as ``/dev/zero``, a FIFO: refused before any read) or
a line longer than :data:`aiblox.inputs.MAX_LINE_BYTES` (files are read line by line, in
bounded memory).
Tolerated, counted and warned about, not fatal: a qrels row naming a document absent from the
corpus (``Dataset.missing_qrels_docs``; a defect of public collections), a repeated identical
judgment (``Dataset.duplicate_qrels``) and a derived split part that holds no query.
Your own data, in three forms that load alike (same checks, same dataset hash):

- a folder holding ``corpus.{jsonl,jsonl.gz,csv,tsv,parquet}``, ``queries.{jsonl,csv,tsv,
  parquet}`` and ``qrels/<split>.{tsv,csv,parquet}`` (one of each; a folder of BEIR files
  alone loads as BEIR, above);
- a manifest, ``dataset.toml`` in a folder (or any ``*.toml`` file passed by path), naming the
  files relative to itself and, where they differ from the defaults, their column names::

      name = "support"                    # optional; default: the folder's name
      corpus = "docs.csv"
      queries = "questions.parquet"
      qrels = {test = "judged.csv", train = "train.csv"}  # or "all.csv", with a split column
      split = "test"                      # the split of rows without one (default "test")
      [columns.corpus]                    # keys: id, text, title, metadata
      id = "doc_id"
      [columns.qrels]                     # keys: query_id, doc_id, score, split
      score = "rel"

- :meth:`Dataset.from_frames` with pandas DataFrames.

Columns found without a mapping: corpus ``_id`` (or ``id``, ``doc_id``, ``docid``), ``text``,
optional ``title`` and ``metadata`` (an object; JSON text in CSV); queries ``_id`` (or
``id``, ``query_id``, ``qid``) and ``text`` (or ``query``); qrels ``query_id`` (or
``query-id``, ``qid``), ``doc_id`` (or ``corpus_id``, ``corpus-id``, ``docid``), ``score``
(or ``relevance``, ``grade``) and optional ``split``. Other columns are ignored. CSV and TSV
files have a header row and are read as text (an id ``007`` stays ``007``); a TSV field is
the text between tabs, quotes and all, and one a CSV writer quoted (``"`` first and last,
``""`` inside, as pandas' ``to_csv(sep="\t")`` writes a field holding ``"``) is warned about,
naming the file, line and column (write TSV with ``quoting=csv.QUOTE_NONE``); ids are strings
or integers, under the id rule above. Errors name the file (or frame), the line (CSV,
TSV, JSONL), row (parquet, 1-based) or index label (DataFrame), and the column: a missing
column (with the columns present), a missing, empty or duplicate id, a grade that is not a
whole number, a qrels row naming an unknown query, conflicting grades. As for BEIR files, a
qrels row naming a document absent from the corpus is a warning, not an error (counted in
``Dataset.missing_qrels_docs``: public collections have them, and BEIR's and ranx's tools
keep them). The hash: a JSONL file's bytes, as in a BEIR folder; a CSV, TSV or parquet file
or a DataFrame, the bytes of its rows written as BEIR lines, in their order, a repeated row
each time (:func:`content_hash`'s lines): the same rows give the same hash as a BEIR folder, a
CSV, TSV or parquet file, a manifest or a DataFrame. A copy made by ``dataclasses.replace``
hashes its content instead (:class:`Dataset` says when the two differ).

Documents and judged queries whose text the DuckDB store's BM25 cannot index (CJK, emoji, ...:
:mod:`aiblox.text.lexical_gaps`) are warned about once, with counts and an example
(``Dataset.lexical_gaps``).

==============  ==============================================================================
module          what it is for
==============  ==============================================================================
``dataset``     :class:`Dataset`, its content hash, :func:`load_dataset` and the partial reads
``find``        where a dataset is, its name, its splits, its corpus file
``rules``       :class:`DatasetError`, the id rule, grades, derived splits, the hashed lines
``beir``        BEIR JSONL and qrels files, read in bounded memory
``tables``      CSV, TSV, parquet and JSONL tables, ``dataset.toml`` manifests, DataFrames
``delimited``   CSV and TSV files read as rows, and the warning for a TSV field CSV-quoted
``trec``        TREC run files read and written as trec_eval reads them
``facts``       a large corpus's hash, ids and lexical gaps, recorded once, trusted while its
                file is unchanged
==============  ==============================================================================
"""

from aiblox.data.dataset import (
    LEXICAL_ANALYZER,
    Dataset,
    GoldAnswer,
    content_hash,
    corpus_hash,
    document_gaps,
    iter_corpus,
    load_dataset,
    read_queries,
    warn_lexical_gaps,
)
from aiblox.data.find import available_splits, corpus_file, dataset_name, find_dataset
from aiblox.data.rules import (
    ID_RULE,
    MAX_GRADE,
    DatasetError,
    held_out_by,
    parse_split,
    split_part,
    splits_overlap,
)
from aiblox.data.trec import RunFileError, read_trec_run, trec_run_text

__all__ = [
    "Dataset",
    "DatasetError",
    "GoldAnswer",
    "ID_RULE",
    "LEXICAL_ANALYZER",
    "MAX_GRADE",
    "RunFileError",
    "available_splits",
    "content_hash",
    "corpus_file",
    "corpus_hash",
    "dataset_name",
    "document_gaps",
    "find_dataset",
    "held_out_by",
    "iter_corpus",
    "load_dataset",
    "parse_split",
    "read_queries",
    "read_trec_run",
    "split_part",
    "splits_overlap",
    "trec_run_text",
    "warn_lexical_gaps",
]
