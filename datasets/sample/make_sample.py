"""Write the aiblox sample collection (BEIR layout) from the content held in this file.

The sample is a small labelled collection written for aiblox: 40 short documents on six
topics around information retrieval, 16 queries (12 test, 4 train), graded relevance
judgments and SQuAD-style answer spans. It is used by ``aiblox quickstart`` and by fast
tests. Licence: CC BY 4.0.

Run from anywhere::

    python datasets/sample/make_sample.py          # (re)write the files next to this script
    python datasets/sample/make_sample.py --check  # fail if the files on disk differ

The output is deterministic: JSON with sorted keys and ``ensure_ascii=False``, ``\\n``
line endings, records in id order. Before writing, the content is validated: unique ids,
word counts, every judged query and document exists, every answer string occurs in the
gold document and its offset slices back to it. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent

MIN_WORDS = 80
MAX_WORDS = 300

TOPICS = (
    "lexical-retrieval",
    "dense-retrieval",
    "evaluation",
    "tokenisation-chunking",
    "databases",
    "libraries",
)


def prose(block: str) -> str:
    """Turn an indented, hard-wrapped block into text.

    Paragraphs are separated by blank lines and joined with ``\\n\\n``; the lines inside a
    paragraph are joined with single spaces. Markdown headings stand as their own
    paragraphs.
    """
    paragraphs = textwrap.dedent(block).strip().split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


@dataclass(frozen=True)
class Doc:
    id: str
    topic: str
    year: int
    title: str
    text: str


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    split: str
    judgments: tuple[tuple[str, int], ...]
    """(corpus-id, score); the first doc with score 2 is the gold doc for the answers."""
    answers: tuple[str, ...]
    """Answer strings, each found verbatim (first occurrence) in the gold doc's text."""


# --------------------------------------------------------------------------------------
# Documents
# --------------------------------------------------------------------------------------

DOCS: tuple[Doc, ...] = (
    # ---------------------------------------------------------------- lexical retrieval
    Doc(
        "d01",
        "lexical-retrieval",
        1994,
        "BM25",
        prose(
            """
            # BM25

            BM25 is a ranking function for lexical retrieval. It scores a document against
            a query by adding up a weight for every query term that the document contains.
            It grew out of the probabilistic relevance framework developed by Stephen
            Robertson, Karen Spärck Jones and colleagues, and was tested in the Okapi
            system at City University London in the TREC evaluations of the mid-1990s.

            ## Term frequency saturation

            A term that appears twice in a document is better evidence than one that
            appears once, but the tenth occurrence adds little over the ninth. BM25 models
            this with a saturating curve controlled by the parameter k1. Common values of
            k1 lie between 1.2 and 2.0; with k1 = 0 term frequency is ignored altogether.

            ## Length normalisation

            Long documents contain more words and so match more query terms by chance. The
            parameter b, usually 0.75, sets how strongly term frequency is normalised by
            document length relative to the average length in the collection. With b = 0
            no length normalisation is applied.

            ## Inverse document frequency

            Each term weight is multiplied by an inverse document frequency factor, so rare
            terms count for more than common ones. Implementations differ in the exact
            formula; Lucene adds one inside the logarithm so that the weight never becomes
            negative.
            """
        ),
    ),
    Doc(
        "d02",
        "lexical-retrieval",
        1972,
        "Inverse document frequency",
        prose(
            """
            Inverse document frequency, usually shortened to IDF, expresses how specific a
            term is. Karen Spärck Jones proposed the idea in a 1972 paper in the Journal of
            Documentation, arguing that a term which occurs in many documents of a
            collection is a poor discriminator between them. A word such as "the" or
            "study" appears nearly everywhere, so finding it in a document says almost
            nothing about whether that document is the one a searcher wants. A rare term,
            such as the name of a particular enzyme, narrows the field sharply. The usual
            form of the weight is the logarithm of the number of documents in the
            collection divided by the number of documents that contain the term. A term
            found in every document therefore gets a weight near zero, while a term found
            in a single document gets the largest weight. IDF is computed once per term
            from collection statistics and does not depend on any particular query. It
            remains part of nearly every lexical ranking function, including TF-IDF
            weighting and BM25, and the same statistic is used outside search, for example
            to pick keywords that characterise a document.
            """
        ),
    ),
    Doc(
        "d03",
        "lexical-retrieval",
        1975,
        "TF-IDF weighting in the vector space model",
        prose(
            """
            In the vector space model, each document and each query is represented as a
            vector with one dimension per term in the vocabulary. Gerard Salton and his
            colleagues developed the model for the SMART retrieval system at Cornell
            University, and a widely cited description appeared in 1975. The value in each
            dimension is a weight, most often the product of term frequency and inverse
            document frequency, known as TF-IDF. Term frequency rewards documents that use
            a query term often; inverse document frequency rewards terms that are rare in
            the collection. Documents are ranked by the cosine of the angle between the
            document vector and the query vector, which removes the effect of vector
            length. These vectors are sparse: a document uses only a tiny fraction of the
            vocabulary, so almost every dimension is zero, which is why an inverted index
            can compute the scores efficiently. TF-IDF has no saturation of term frequency,
            and raw counts are often replaced by one plus their logarithm to damp repeated
            terms. BM25 can be seen as a refinement that adds saturation and a tunable
            length normalisation to the same basic ingredients.
            """
        ),
    ),
    Doc(
        "d04",
        "lexical-retrieval",
        2003,
        "The inverted index",
        prose(
            """
            # The inverted index

            An inverted index maps each term to the list of documents that contain it. It
            is the data structure behind almost every lexical search engine, from early
            library systems to Lucene.

            ## Dictionary and postings

            The index has two parts. The dictionary holds every distinct term, often with
            its document frequency. For each term there is a postings list: the identifiers
            of the documents that contain the term, usually with the number of occurrences
            and sometimes the position of each occurrence, which phrase queries need.

            ## Query processing

            To answer a query, the engine reads only the postings lists of the query terms,
            so the cost depends on how common those terms are rather than on the size of
            the whole collection. Scores are accumulated per document, and the best k
            documents are kept in a heap. Dynamic pruning methods such as WAND, published
            in 2003, and MaxScore skip documents that cannot reach the top k.

            ## Compression

            Postings lists are sorted by document identifier, so they can be stored as gaps
            between successive identifiers. Small gaps need few bits, and variable-byte or
            bit-packed codes shrink the index to a fraction of the size of the raw text.
            """
        ),
    ),
    Doc(
        "d05",
        "lexical-retrieval",
        1980,
        "Stemming and the Porter algorithm",
        prose(
            """
            Stemming reduces related word forms to a common stem, so that a query for
            "connection" also matches "connected" and "connecting". The best known
            algorithm for English is the Porter stemmer, published by Martin Porter in
            1980. It does not use a dictionary. Instead it strips suffixes in a series of
            steps, each made of rewriting rules with conditions on the remaining stem. For
            example, one step turns "sses" into "ss" and drops a final "s", and a later step
            rewrites the ending "ational" as "ate" and removes "ness" when enough of the
            word remains. The stems it produces are not always real words: "relational" and
            "relate" both end up as "relat". That does not matter for retrieval, because
            the same rules are applied to documents and queries alike. Stemming raises
            recall, but it can also merge words with different meanings, such as
            "university" and "universe", which both reduce to "univers". Porter later
            designed Snowball, a small language for writing stemmers, and the English
            Snowball stemmer is a revised version of the original algorithm. Lighter
            alternatives remove only plural endings, and lemmatisers use a dictionary to
            return proper base forms.
            """
        ),
    ),
    Doc(
        "d06",
        "lexical-retrieval",
        1958,
        "Stop words",
        prose(
            """
            Stop words are very common words, such as "the", "of", "and" and "is", that a
            search engine may leave out of its index or ignore in queries. The idea goes
            back to the early days of automatic text processing: Hans Peter Luhn, working
            at IBM in the late 1950s, observed that the most frequent words of a text say
            little about its subject. Removing them shrinks an index considerably, since
            the commonest words have the longest postings lists. Stop lists are usually
            short, a few hundred words at most, and are specific to a language. Removal has
            costs. Some queries consist largely of stop words, such as "to be or not to be"
            or the band name "The Who", and phrase searches lose precision when function
            words disappear. For this reason many modern engines keep every word in the
            index and rely on inverse document frequency to give common words a low weight
            at query time. Stop lists also differ between tools, so two BM25
            implementations that share every parameter can still rank differently if one
            removes stop words and the other does not.
            """
        ),
    ),
    Doc(
        "d07",
        "lexical-retrieval",
        1971,
        "Query expansion and pseudo-relevance feedback",
        prose(
            """
            Query expansion adds terms to a query so that it matches documents that
            describe the same thing in other words. One of the oldest methods is relevance
            feedback. Working on the SMART system, Joseph Rocchio described in 1971 how a
            query vector can be moved towards the vectors of documents the user marked as
            relevant and away from those marked non-relevant. Pseudo-relevance feedback
            takes the user out of the loop: the system assumes that the top few documents
            of a first retrieval are relevant, picks frequent and distinctive terms from
            them, and runs a second, expanded query. RM3, a relevance model method, is a
            common choice when BM25 is the first-stage ranker. Expansion helps with
            vocabulary mismatch, the problem that searchers and authors often choose
            different words for the same concept, such as "car" and "automobile". It can
            also hurt: if the first results are off topic, the added terms pull the query
            further away from what was meant. This failure is called query drift. Dense
            retrieval attacks the same mismatch problem from another side, by comparing
            learned representations of meaning instead of the words themselves.
            """
        ),
    ),
    # ------------------------------------------------------------------ dense retrieval
    Doc(
        "d08",
        "dense-retrieval",
        2019,
        "Sentence embeddings",
        prose(
            """
            A sentence embedding is a fixed-length vector of numbers that represents the
            meaning of a whole sentence or short passage. Sentences with similar meanings
            receive vectors that lie close together, even when they share no words, so "How
            do I reset my password?" and "I forgot my login credentials" can end up near
            each other. Sentence-BERT, published by Nils Reimers and Iryna Gurevych in 2019,
            showed how to fine-tune a BERT model in a siamese setup so that the mean of its
            token outputs makes a useful sentence vector. Models of this kind are trained
            on pairs of texts that should match, such as a question and its answer, and
            learn to pull matching pairs together and push other pairs apart. A small
            model such as all-MiniLM-L6-v2 produces vectors with 384 dimensions and runs
            quickly on an ordinary processor. Closeness is usually measured with cosine
            similarity, and many models normalise their output to unit length so that a
            plain dot product gives the same ranking. Because the vectors are learned,
            their quality depends on the training data: a model trained on web questions
            may do worse on legal or medical text.
            """
        ),
    ),
    Doc(
        "d09",
        "dense-retrieval",
        2020,
        "Dense passage retrieval",
        prose(
            """
            # Dense passage retrieval

            Dense passage retrieval, or DPR, was introduced by Vladimir Karpukhin and
            colleagues in 2020 for open-domain question answering. It replaced the lexical
            first stage of a question answering system with learned vectors and beat BM25
            on several benchmarks of that kind.

            ## Bi-encoder architecture

            DPR uses two BERT encoders, one for questions and one for passages. Each maps
            its input to a 768-dimensional vector, and relevance is the dot product of the
            two vectors. Because passages are encoded independently of any question, the
            whole collection can be encoded once, ahead of time, and stored in a vector
            index.

            ## Training with negatives

            The encoders are trained so that a question scores higher with its gold
            passage than with other passages. DPR uses in-batch negatives: the gold
            passages of the other questions in the same batch serve as negatives at no
            extra cost. Adding a hard negative, a passage that BM25 ranks highly but that
            does not contain the answer, improved results further.

            ## Limits

            Dense retrievers trained on one domain often generalise poorly to others. The
            BEIR benchmark showed that BM25 remains a strong baseline on many collections
            outside the training domain, which is one reason hybrid systems combine both.
            """
        ),
    ),
    Doc(
        "d10",
        "dense-retrieval",
        2016,
        "HNSW graphs for approximate nearest neighbour search",
        prose(
            """
            # HNSW graphs for approximate nearest neighbour search

            Hierarchical Navigable Small World graphs, known as HNSW, are a method for
            approximate nearest neighbour search described by Yury Malkov and Dmitry
            Yashunin in 2016. They are used in many vector search libraries and databases,
            including FAISS, hnswlib, Lucene and pgvector.

            ## Structure

            Every vector is a node in a graph and is linked to a small number of close
            neighbours. The graph has several layers. The top layer holds only a few nodes
            with long links; each lower layer holds more nodes, and the bottom layer holds
            all of them. A node's highest layer is drawn at random when it is inserted.

            ## Search

            A search starts at an entry point in the top layer and moves greedily to
            whichever neighbour is closest to the query vector, then drops to the next
            layer and repeats. On the bottom layer it keeps a candidate list of size ef and
            returns the best k results found. A larger ef gives higher recall at the cost
            of speed.

            ## Trade-offs

            HNSW gives high recall at low latency, but the graph is held in memory and
            stores several links per vector. Building it is slower than building an
            inverted-file index, and deletions are awkward to support. The parameter M sets
            the number of links per node.
            """
        ),
    ),
    Doc(
        "d11",
        "dense-retrieval",
        2013,
        "Word embeddings: word2vec and GloVe",
        prose(
            """
            Word embeddings assign each word in a vocabulary a dense vector of a few
            hundred numbers, learned from the contexts in which the word occurs. The
            approach rests on the distributional hypothesis: words that appear in similar
            contexts tend to have similar meanings. Word2vec, released by Tomas Mikolov and
            colleagues at Google in 2013, learned such vectors with two simple neural
            models, skip-gram and continuous bag of words, trained to predict nearby words.
            GloVe, from Stanford in 2014, reached similar vectors by factorising a matrix
            of word co-occurrence counts. The vectors capture some regularities: the
            difference between the vectors for "king" and "man" is close to that between
            "queen" and "woman". Similarity between two words is normally measured with
            cosine similarity. A single vector per word has limits. The word "bank" gets
            one vector whether it refers to a river or to money, and a sentence represented
            as the average of its word vectors loses word order. Contextual models such as
            BERT, which produce a different vector for each occurrence of a word, and the
            sentence encoders built on them have largely replaced static word vectors in
            retrieval.
            """
        ),
    ),
    Doc(
        "d12",
        "dense-retrieval",
        2019,
        "Cross-encoder reranking",
        prose(
            """
            A cross-encoder reads a query and a candidate document together, as one input,
            and outputs a single relevance score. Because every layer of the transformer
            can attend across both texts, a cross-encoder judges relevance more accurately
            than a bi-encoder, which encodes the two texts separately and compares their
            vectors. Rodrigo Nogueira and Kyunghyun Cho showed in 2019 that a BERT model
            fine-tuned this way on the MS MARCO passage ranking data gave large gains over
            earlier methods. The price is speed. A cross-encoder cannot precompute anything
            about the documents, so it must run once for every query and document pair. For
            this reason it is used as a reranker: a fast first stage such as BM25 or a
            dense retriever returns the top 100 or 1,000 candidates, and the cross-encoder
            reorders only those. The final ranking can never contain a document the first
            stage missed, so first-stage recall sets an upper bound on quality. Rerankers
            also have a maximum input length, commonly 512 tokens, so long documents are
            split into passages and a document takes the score of its best passage.
            """
        ),
    ),
    Doc(
        "d13",
        "dense-retrieval",
        2011,
        "Product quantization",
        prose(
            """
            Storing full vectors for millions of documents takes a lot of memory: one
            million 768-dimensional vectors of 32-bit floats need about three gigabytes.
            Product quantization, described by Hervé Jégou, Matthijs Douze and Cordelia
            Schmid in 2011, compresses vectors so that many more fit in memory. Each vector
            is cut into a number of sub-vectors, for example eight. For each position,
            k-means clustering learns a small codebook of 256 centroids, and each
            sub-vector is replaced by the one-byte index of its nearest centroid. A
            768-dimensional vector thus shrinks to eight bytes. Distances between a query
            and the compressed vectors are estimated from precomputed tables of
            query-to-centroid distances, which makes scanning fast. The estimate is
            approximate, so some true nearest neighbours are missed; systems often fetch
            more candidates than needed and rerank them with the exact vectors. FAISS
            combines product quantization with an inverted file, known as IVF-PQ, which
            first assigns each vector to a coarse cluster and searches only the clusters
            nearest to the query. Scalar quantization, which stores each dimension in eight
            bits instead of thirty-two, is a simpler alternative that loses less accuracy
            but saves less space.
            """
        ),
    ),
    Doc(
        "d14",
        "dense-retrieval",
        2009,
        "Hybrid retrieval and reciprocal rank fusion",
        prose(
            """
            # Hybrid retrieval and reciprocal rank fusion

            Lexical retrieval such as BM25 is precise on rare terms, names and codes; dense
            retrieval finds passages that express the query in other words. Hybrid
            retrieval runs both and merges their results, and it often beats either one
            alone.

            ## Reciprocal rank fusion

            Reciprocal rank fusion, proposed by Gordon Cormack, Charles Clarke and Stefan
            Büttcher in 2009, ignores the raw scores and uses only ranks. Each document
            receives 1/(k + rank) from every list in which it appears, and the sums decide
            the final order. The constant k is usually 60; it damps the advantage of the
            very top ranks. A document ranked first by one system and third by another
            scores 1/61 + 1/63.

            ## Score fusion

            The alternative is to combine scores, for example as a weighted sum of BM25 and
            cosine scores. Scores must first be brought to a common scale, with min-max or
            z-score normalisation, because BM25 scores are unbounded while cosine
            similarities lie between -1 and 1. The weight is tuned on training queries.

            ## Missing documents

            A document may appear in one list and not in the other. A fusion method must
            decide what score it gets from the list that missed it: zero, the minimum of
            that list, or some floor value. The choice changes the final ranking and should
            be recorded.
            """
        ),
    ),
    # ----------------------------------------------------------------------- evaluation
    Doc(
        "d15",
        "evaluation",
        1966,
        "The Cranfield experiments",
        prose(
            """
            The Cranfield experiments, led by the librarian Cyril Cleverdon at the College
            of Aeronautics in Cranfield, England, set the pattern for evaluating retrieval
            systems. The first project, begun in 1957, compared four indexing systems,
            among them the Universal Decimal Classification and an alphabetical subject
            catalogue, on a collection of papers in aeronautics. The second project,
            Cranfield II, ran in the 1960s and used 1,400 documents and a set of questions,
            with relevance judgments made for each question. Its best-known finding
            surprised many librarians: indexing by single words taken from the documents
            worked as well as or better than elaborate controlled vocabularies. More lasting
            than any single result was the method. A fixed set of documents, a fixed set of
            queries and a list of which documents are relevant to each query allowed
            different systems to be compared on equal terms, using measures such as
            precision and recall. This arrangement, called the Cranfield paradigm,
            underlies TREC and most later test collections. The Cranfield II collection
            itself is still distributed and used as a small benchmark.
            """
        ),
    ),
    Doc(
        "d16",
        "evaluation",
        2002,
        "Normalised discounted cumulative gain",
        prose(
            """
            # Normalised discounted cumulative gain

            Normalised discounted cumulative gain, or nDCG, measures the quality of a
            ranked list when relevance is graded rather than binary. It was introduced by
            Kalervo Järvelin and Jaana Kekäläinen, whose journal article appeared in 2002.

            ## Gain and discount

            Each retrieved document contributes a gain that depends on its relevance grade,
            for example 2 for highly relevant, 1 for partly relevant and 0 for not
            relevant. A gain found lower in the list is worth less, so it is divided by a
            discount that grows with rank, usually the base-2 logarithm of the rank plus
            one. Summing the discounted gains over the top k positions gives DCG@k. Some
            implementations use 2 to the power of the grade, minus one, as the gain, which
            rewards highly relevant documents more strongly.

            ## Normalisation

            DCG values are not comparable across queries, since a query with many relevant
            documents can reach a higher total. Dividing by the ideal DCG, the DCG of the
            best possible ranking of the judged documents for that query, maps the score to
            the range from 0 to 1. The ideal ranking must be built from all relevance
            judgments for the query, not just from the retrieved documents; otherwise a
            system that finds only one weak document can score a perfect 1.

            ## Use

            nDCG@10 is the main measure of the BEIR benchmark.
            """
        ),
    ),
    Doc(
        "d17",
        "evaluation",
        1992,
        "Precision, recall and mean average precision",
        prose(
            """
            Precision is the fraction of retrieved documents that are relevant; recall is
            the fraction of relevant documents that are retrieved. The two pull against
            each other: retrieving more documents tends to raise recall and lower
            precision. For ranked lists they are usually measured at a cut-off, as
            precision at 10 or recall at 100. Average precision combines both for a single
            query. Walking down the ranking, it takes the precision at each position where
            a relevant document appears and averages these values over the total number of
            relevant documents, so relevant documents that are never retrieved count as
            zero. Mean average precision, or MAP, is the mean of average precision over all
            queries, and it became a standard summary measure in the TREC evaluations that
            began in 1992. MAP treats relevance as binary, rewards systems that place
            relevant documents early, and is sensitive to recall deep in the ranking. The
            F1 score, the harmonic mean of precision and recall, is more common in
            classification than in ranked retrieval, because it ignores the order of the
            results.
            """
        ),
    ),
    Doc(
        "d18",
        "evaluation",
        1999,
        "Mean reciprocal rank",
        prose(
            """
            Mean reciprocal rank, or MRR, suits tasks where the user needs only one good
            answer, such as question answering or finding a known web page. For each query
            it takes the reciprocal of the rank of the first relevant result: 1 if that
            result is at the top, 0.5 if it is second, a third if it is third, and 0 if no
            relevant result is found within the cut-off. The mean over all queries is the
            MRR. The measure was used to score systems in the question answering track of
            TREC-8 in 1999, where each system returned a short ranked list of candidate
            answers per question. MRR is easy to explain, but it ignores everything after
            the first relevant result, so it cannot tell apart a system that finds one
            relevant document from a system that finds ten. It is also uneven across ranks:
            moving the first hit from rank 1 to rank 2 halves the score of a query, while
            moving it from rank 9 to rank 10 barely changes it. The MS MARCO passage
            ranking task reports MRR@10 as its official measure.
            """
        ),
    ),
    Doc(
        "d19",
        "evaluation",
        1992,
        "TREC and pooled relevance judgments",
        prose(
            """
            The Text REtrieval Conference, TREC, has been run by the US National Institute
            of Standards and Technology since 1992. Each year it offers tracks, such as ad
            hoc retrieval, question answering or web search, in which research groups run
            their systems on a shared collection and a shared set of topics and submit
            ranked results. Collections of hundreds of thousands of documents are far too
            large for assessors to judge every document against every topic. TREC
            therefore uses pooling: the top results from each submitted run, often the top
            100, are merged into a pool, and only the pooled documents are judged by human
            assessors. Documents outside the pool are treated as not relevant. Pooling
            makes large test collections affordable, and studies found that the ranking of
            systems stays fairly stable even though many relevant documents go unjudged.
            The bias matters for new systems that retrieve documents unlike those of the
            original runs: their relevant finds count as misses. Measures such as bpref
            were proposed for incomplete judgments. A TREC topic usually has a short title,
            a one-sentence description and a longer narrative that tells assessors what
            counts as relevant.
            """
        ),
    ),
    Doc(
        "d20",
        "evaluation",
        2007,
        "Significance testing for retrieval experiments",
        prose(
            """
            Two retrieval systems evaluated on the same fifty queries will almost never get
            identical scores, so a difference in mean nDCG or MAP needs to be checked
            against chance. Because both systems run on the same queries, the tests used
            are paired tests on per-query scores. The paired t-test assumes that the
            per-query differences are roughly normally distributed. The Wilcoxon
            signed-rank test and the sign test make weaker assumptions. The randomisation,
            or permutation, test repeatedly swaps the two systems' scores on random subsets
            of queries and counts how often the resulting difference is as large as the one
            observed. A 2007 study by Mark Smucker, James Allan and Ben Carterette compared
            these tests on TREC runs and recommended the randomisation test and the t-test,
            which largely agreed, over the sign and Wilcoxon tests. When many systems or
            many parameter settings are compared, some differences will look significant by
            chance, so corrections for multiple comparisons are needed. Tuning parameters
            on the same queries used to report results inflates scores in a similar way; a
            separate tuning split avoids this. Effect sizes and confidence intervals say
            more than a p-value alone.
            """
        ),
    ),
    Doc(
        "d21",
        "evaluation",
        2021,
        "Test collections in BEIR layout",
        prose(
            """
            # Test collections in BEIR layout

            BEIR, a benchmark published by Nandan Thakur and colleagues in 2021, gathered
            many retrieval data sets into one simple file layout. The layout has become a
            common way to exchange test collections.

            ## Corpus

            The corpus is a JSON Lines file in which each line holds one document with an
            _id, a title and a text field. Identifiers are strings, even when they look
            like numbers.

            ## Queries

            A second JSON Lines file holds the queries, each with an _id and a text field.
            It may include the queries of several splits.

            ## Relevance judgments

            Judgments, often called qrels, sit in tab-separated files named after their
            split, such as test.tsv or train.tsv. After a header line, each row gives a
            query id, a document id and an integer score. A score of 0 marks a judged but
            non-relevant document, and higher scores mark higher grades of relevance.
            Documents missing from the qrels are unjudged and are normally treated as
            non-relevant.

            ## Splits

            Parameters should be tuned on one split and results reported on another, so
            that the reported numbers are not inflated by fitting to the test queries.
            """
        ),
    ),
    # ------------------------------------------------------------ tokenisation, chunking
    Doc(
        "d22",
        "tokenisation-chunking",
        2016,
        "Byte pair encoding",
        prose(
            """
            # Byte pair encoding

            Byte pair encoding, or BPE, builds a vocabulary of subword units from training
            text. It began as a data compression method described by Philip Gage in 1994
            and was adapted for neural machine translation by Rico Sennrich and colleagues
            in 2016.

            ## Learning merges

            Training starts with a vocabulary of single characters, or of single bytes in
            byte-level BPE. The algorithm counts every pair of adjacent symbols in the
            training text, merges the most frequent pair into a new symbol, and repeats
            until the vocabulary reaches a chosen size, such as 32,000 or 100,000 entries.
            The ordered list of merges is the learned model.

            ## Encoding

            To tokenise new text, the merges are applied in the order they were learned.
            Frequent words end up as single tokens, while a rare word such as a chemical
            name is split into several pieces. Because every byte is in the base
            vocabulary, byte-level BPE can encode any input without an unknown token.

            ## Use

            The GPT family of language models uses byte-level BPE; OpenAI's tiktoken
            library implements its encodings, among them cl100k_base with a vocabulary of
            about 100,000 tokens. A token count therefore depends on the encoding, and the
            same text can take a different number of tokens under another model.
            """
        ),
    ),
    Doc(
        "d23",
        "tokenisation-chunking",
        2018,
        "WordPiece and SentencePiece",
        prose(
            """
            WordPiece is the subword tokeniser used by BERT. Like byte pair encoding it
            builds a vocabulary by merging smaller units, but it chooses the merge that
            most increases the likelihood of the training data rather than the most
            frequent pair. The English uncased BERT model has a vocabulary of 30,522
            entries, and pieces that continue a word are marked with two hash signs, so
            "embeddings" may become "em", "##bed", "##ding" and "##s". WordPiece first
            splits text on white space and punctuation, which suits English but not
            languages written without spaces. SentencePiece, released by Taku Kudo and John
            Richardson in 2018, treats the input as a raw stream of characters, including
            spaces, which it marks with a special symbol. It can train either a BPE model or
            a unigram language model, which starts from a large vocabulary and removes the
            pieces that contribute least to the likelihood. Because spaces are kept as
            symbols, SentencePiece can turn tokens back into the exact original text. T5
            and many multilingual encoders use it. In every case the tokeniser must match
            the model: text tokenised for one model is meaningless input to another.
            """
        ),
    ),
    Doc(
        "d24",
        "tokenisation-chunking",
        2020,
        "Fixed-size chunking with overlap",
        prose(
            """
            Retrieval-augmented generation, described by Patrick Lewis and colleagues in
            2020, retrieves passages and passes them to a language model as context. Long
            documents must first be cut into chunks, because embedding models and prompts
            have length limits and because a short passage matches a query more sharply
            than a whole report. The simplest method cuts the text into pieces of a fixed
            number of tokens, for example 256 or 512. To avoid splitting a fact across the
            boundary between two pieces, consecutive chunks usually overlap, often by 10 to
            20 percent of the chunk size. Overlap makes the index larger and can return
            near-duplicate chunks, which then need to be removed before they fill the
            prompt. Fixed-size chunking ignores the structure of the text: a chunk may start
            in the middle of a sentence or combine the end of one section with the start of
            the next. Splitting on sentence or paragraph boundaries and then packing whole
            sentences up to the size limit keeps chunks readable. Whatever the method, each
            chunk should keep the id of its source document and its character offsets, so
            that answers can cite the exact passage.
            """
        ),
    ),
    Doc(
        "d25",
        "tokenisation-chunking",
        2023,
        "Heading-aware chunking",
        prose(
            """
            # Heading-aware chunking

            Many documents, such as manuals, wiki pages and README files, are written in
            markdown or a similar format with headings. A heading-aware chunker splits a
            document at its headings so that each chunk covers one section.

            ## Why sections make good chunks

            A section is written to be about one thing, so it is a natural unit of
            retrieval. A chunk that starts at a heading rarely begins in the middle of an
            argument, and the heading itself is a short summary of the section that helps
            both lexical and dense matching.

            ## Keeping the path

            A section titled Installation means little on its own. Good chunkers record the
            path of headings above each chunk, for example "User guide > Installation >
            Windows", and either store it as metadata or put it in front of the chunk text
            before embedding.

            ## Sections that are too long or too short

            Sections vary in length. A long section is split further, by paragraphs or by a
            token limit, with some overlap. Very short sections, such as a heading followed
            by one line, can be merged with their neighbours so that chunks are not too
            small to be useful.

            ## Edge cases

            A line starting with a hash sign inside a fenced code block is not a heading.
            Text before the first heading forms a chunk of its own.
            """
        ),
    ),
    Doc(
        "d26",
        "tokenisation-chunking",
        2006,
        "Sentence splitting",
        prose(
            """
            Splitting text into sentences sounds trivial but is not. A full stop ends most
            sentences, yet it also appears in abbreviations such as "Dr." and "e.g.", in
            decimal numbers such as 3.14, in initials and in web addresses. A rule that
            breaks after every full stop followed by a space and a capital letter fails on
            "Dr. Smith" and on many other common constructions. The Punkt algorithm,
            published by Tibor Kiss and Jan Strunk in 2006, learns abbreviations, initials
            and typical sentence starters from unlabelled text in the target language, and
            NLTK ships trained Punkt models for many languages. Other tools use hand-written
            rules, statistical models or neural networks trained on annotated text.
            Sentence boundaries matter for retrieval systems that chunk text by sentences,
            for extractive summaries and for citing evidence: a citation that begins in the
            middle of a sentence is hard to read. Errors also carry into later steps. A
            missed boundary produces an overlong sentence that may exceed a chunk limit,
            while a false boundary after an abbreviation can separate a name from the rest
            of its sentence.
            """
        ),
    ),
    Doc(
        "d27",
        "tokenisation-chunking",
        2023,
        "Counting tokens for a context window",
        prose(
            """
            Language models read text as tokens, and every model has a context window, a
            maximum number of tokens it can process at once across the prompt and the
            generated answer. A retrieval-augmented system must therefore count tokens when
            it decides how many retrieved passages to include. Counting words or characters
            gives only an estimate. For English prose, one token is roughly three quarters
            of a word, or about four characters, but code, numbers, tables and text in other
            languages often take many more tokens per word. The exact count depends on the
            tokeniser: OpenAI's tiktoken library gives exact counts for its encodings, such
            as cl100k_base and o200k_base, while other model families ship their own
            tokenisers. A prompt budget usually reserves room for the instructions, the
            question and the answer, and fills the rest with evidence in order of
            relevance. When a passage does not fit, the system can skip it, cut it at a
            sentence boundary or try a shorter passage further down the list. The procedure
            should be deterministic, so that the same inputs always produce the same prompt.
            """
        ),
    ),
    # ------------------------------------------------------------------------ databases
    Doc(
        "d28",
        "databases",
        2019,
        "DuckDB",
        prose(
            """
            # DuckDB

            DuckDB is an open-source analytical database that runs inside the process of
            the program that uses it, much as SQLite does for transactional work. It was
            created by Mark Raasveldt and Hannes Mühleisen at the Centrum Wiskunde &
            Informatica in Amsterdam and first released in 2019.

            ## Design

            DuckDB stores tables by column and executes queries on vectors of values,
            batches of about two thousand rows at a time, which suits scans and
            aggregations over large tables. A whole database lives in a single file, or
            entirely in memory, and there is no server to install.

            ## Data access

            DuckDB can query Parquet, CSV and JSON files directly, without loading them
            first, and exchanges data with pandas and Apache Arrow with little copying.
            This makes it popular for data analysis in Python notebooks.

            ## Extensions

            Features such as full-text search and vector similarity search come as
            extensions that are loaded on demand. The fts extension builds an index for
            BM25 keyword search, and the vss extension adds an HNSW index for vectors.

            ## Concurrency

            Only one process at a time can open a database file for writing. DuckDB is not
            meant to serve many concurrent writers, as a server database such as PostgreSQL
            is.
            """
        ),
    ),
    Doc(
        "d29",
        "databases",
        2020,
        "Full-text search in DuckDB",
        prose(
            """
            The full-text search extension of DuckDB adds keyword search with BM25 ranking.
            An index is created with the pragma create_fts_index, given the table name, the
            column that holds document ids and the text columns to index. Options choose
            the stemmer, for example the Porter stemmer for English, a stop word list, and
            whether to strip accents and convert text to lower case. The pragma creates a
            new schema holding the index tables and a scoring macro, match_bm25, which
            takes a document id and a query string and returns a score, or NULL when the
            document matches no query term. Its parameters k and b default to 1.2 and 0.75.
            The index is not maintained automatically: after rows are inserted, updated or
            deleted, it must be rebuilt, by running the pragma again with overwrite
            enabled, before searches see the changes. Ranking treats each document as a bag of
            words, and there is no phrase search. For small and
            medium collections it is a convenient way to add lexical retrieval to an
            analytical workflow without running a separate search server.
            """
        ),
    ),
    Doc(
        "d30",
        "databases",
        1972,
        "B-tree indexes in PostgreSQL",
        prose(
            """
            The B-tree, described by Rudolf Bayer and Edward McCreight in 1972, is the
            default index structure in most relational databases, including PostgreSQL. It
            is a balanced tree whose nodes hold many sorted keys, so the tree stays
            shallow: a few levels are enough for millions of rows, and each lookup reads
            only a few pages. In PostgreSQL, CREATE INDEX without a USING clause builds a
            B-tree. It supports equality and range conditions such as =, < and BETWEEN,
            sorting with ORDER BY, and prefix matching with LIKE 'abc%' when the collation
            or operator class allows it. It does not help with a pattern that begins with a
            wildcard, such as LIKE '%abc', and it cannot look inside a column of free text
            for individual words. For that PostgreSQL offers other index types: GIN for
            full-text search, arrays and JSONB, GiST for geometric data and ranges, and
            BRIN for very large tables whose values follow the physical order of the rows.
            An index speeds up reads but slows down writes, because every insert and update
            must also change the index.
            """
        ),
    ),
    Doc(
        "d31",
        "databases",
        2008,
        "Full-text search in PostgreSQL",
        prose(
            """
            # Full-text search in PostgreSQL

            PostgreSQL has built-in full-text search, part of the core system since version
            8.3 in 2008. It works with two data types and a set of functions.

            ## Documents and queries

            The function to_tsvector turns text into a tsvector: a sorted list of
            normalised words, called lexemes, with their positions. A text search
            configuration such as english decides how words are split, stemmed and
            filtered. Queries are tsquery values, built with to_tsquery, plainto_tsquery or
            websearch_to_tsquery, the last of which accepts the kind of syntax people type
            into web search boxes. The @@ operator tests whether a tsvector matches a
            tsquery.

            ## Indexes

            Without an index, every row must be parsed at query time. A GIN index, a
            generalised inverted index, stores for each lexeme the rows that contain it and
            makes matching fast. A GiST index is smaller and faster to update but may
            return false matches that must be rechecked.

            ## Ranking

            The functions ts_rank and ts_rank_cd order matches by how often and how closely
            the query words occur. They do not use inverse document frequency, so they are
            not BM25, and their scores are not comparable across queries. Third-party
            extensions add BM25 ranking to PostgreSQL.
            """
        ),
    ),
    Doc(
        "d32",
        "databases",
        2021,
        "pgvector",
        prose(
            """
            pgvector is an open-source extension that adds vector similarity search to
            PostgreSQL. It was first released in 2021 and defines a vector column type with
            a fixed number of dimensions, so embeddings can be stored in the same table as
            the rows they describe. Distances are computed with operators: <-> for
            Euclidean distance, <=> for cosine distance and <#> for the negative inner
            product. A query such as ORDER BY embedding <=> '[0.1, 0.2, 0.3]' LIMIT 10
            returns the ten nearest rows by cosine distance. Without an index this is an
            exact scan of every row. Two approximate index types are available. IVFFlat
            divides the vectors into lists around centroids learned from existing data, so
            it should be built after the table is filled, and it searches only the nearest
            few lists. HNSW, added in version 0.5.0, builds a layered neighbour graph and
            gives a better trade-off between speed and recall, at the cost of slower builds
            and more memory. Because vectors live next to ordinary columns, a single SQL
            query can combine similarity search with filters, joins and full-text search.
            """
        ),
    ),
    Doc(
        "d33",
        "databases",
        2005,
        "Columnar storage and vectorised execution",
        prose(
            """
            Analytical databases store data by column rather than by row. A query that sums
            one column of a wide table then reads only that column, and values of the same
            type stored together compress well, often with simple schemes such as
            run-length or dictionary encoding. C-Store, a research system described by
            Michael Stonebraker and colleagues in 2005, helped establish the design, which
            commercial column stores later adopted. In the same year the MonetDB/X100
            project of Peter Boncz, Marcin Zukowski and Niels Nes described vectorised
            execution. Instead of passing one row at a time between operators, as in the
            classic iterator model, each operator processes a vector of a thousand or so
            values in a tight loop. This cuts interpretation overhead and lets the
            processor make good use of its caches and SIMD instructions. Here a vector is a
            batch of values from one column, not an embedding; vector search shares the
            word but not the idea. DuckDB and many other modern engines combine columnar
            storage with vectorised execution. Row stores such as PostgreSQL remain better
            for workloads of small transactions that read and write whole rows.
            """
        ),
    ),
    Doc(
        "d34",
        "databases",
        1979,
        "Query plans and EXPLAIN",
        prose(
            """
            # Query plans and EXPLAIN

            SQL says what result is wanted, not how to compute it. The query optimiser
            chooses a plan: which indexes to use, in which order to join tables and which
            join algorithm to apply. Cost-based optimisation was introduced in IBM's System
            R, described by Patricia Selinger and colleagues in 1979.

            ## Reading a plan

            In PostgreSQL and DuckDB the EXPLAIN command shows the chosen plan as a tree of
            operators, such as sequential scans, index scans, hash joins and sorts. EXPLAIN
            ANALYZE also runs the query and reports the actual time and number of rows at
            each step.

            ## Estimates

            The optimiser estimates how many rows each step will produce from statistics on
            the data, such as the number of distinct values and lists of the most common
            values. PostgreSQL gathers them with the ANALYZE command, which autovacuum also
            runs in the background. When estimates are far from the actual counts, the
            optimiser may pick a poor plan, for example a nested loop join over many rows.

            ## Indexes in plans

            That an index exists does not mean that it is used. If a condition matches a
            large share of the table, a sequential scan is cheaper than an index scan, and
            the optimiser will choose it.
            """
        ),
    ),
    # ------------------------------------------------------------------------ libraries
    Doc(
        "d35",
        "libraries",
        -250,
        "The Library of Alexandria and the Pinakes",
        prose(
            """
            The Library of Alexandria, founded in the early third century BCE under the
            Ptolemaic kings of Egypt, set out to collect the written works of the Greek
            world. Its holdings were papyrus scrolls, and ancient estimates of their
            number, running to hundreds of thousands, are uncertain. The poet and scholar
            Callimachus of Cyrene compiled the Pinakes, or "tables", a survey of Greek
            literature in about 120 books. It is often described as the first library
            catalogue in the Western world. Authors were grouped into classes such as
            rhetoric, law, poetry, history and medicine, and within each class arranged
            alphabetically. An entry gave a short biography of the author, the titles of
            the works and the opening words of each work, together with its length in
            lines. Opening words mattered because many ancient works had no fixed title, so
            the first line served as an identifier. The Pinakes itself has not survived; it
            is known from fragments and references in later writers. Its combination of
            subject classes with alphabetical order anticipates devices that libraries
            still use.
            """
        ),
    ),
    Doc(
        "d36",
        "libraries",
        1876,
        "The Dewey Decimal Classification",
        prose(
            """
            # The Dewey Decimal Classification

            Melvil Dewey published the first edition of his classification in 1876, while
            working at the library of Amherst College, as a pamphlet of 44 pages. It is
            still maintained, now by OCLC, and libraries in many countries use it.

            ## Ten main classes

            Knowledge is divided into ten main classes numbered from 000 to 900: for
            example 500 for natural sciences and mathematics, 600 for technology and 900
            for history and geography. Each class has ten divisions and each division ten
            sections, and digits after the decimal point add further detail, so 516.3 sits
            under geometry within mathematics.

            ## Relative location

            Before Dewey, many libraries gave each book a fixed place on a particular
            shelf. Dewey's numbers describe the subject instead, so a new book is placed
            next to others on the same subject and the collection can grow without
            renumbering.

            ## Alternatives

            The Library of Congress Classification, developed from 1897 and using letters
            followed by numbers, is preferred by most large academic libraries in the
            United States. Critics of Dewey have pointed to its nineteenth-century view of
            the world, such as the large share of the religion class given to Christianity.
            """
        ),
    ),
    Doc(
        "d37",
        "libraries",
        1791,
        "Card catalogues",
        prose(
            """
            A card catalogue describes each item in a library on a separate card, filed in
            drawers. Unlike a printed book catalogue, which is out of date as soon as it is
            printed, a card file can take new entries in their proper place at any time. In
            1791 the French revolutionary government, making inventories of the libraries
            it had seized, instructed that books be recorded on the backs of playing cards.
            During the nineteenth century card catalogues spread through American and
            European libraries, and Melvil Dewey's Library Bureau sold standard cards,
            cabinets and drawers. The standard catalogue card measured 7.5 by 12.5
            centimetres, close to three by five inches. From 1901 the Library of Congress
            sold printed cards to other libraries, so that one cataloguer's work could
            serve many. A book usually had several cards, filed under author, title and
            subject headings, and cross-reference cards guided readers from one heading to
            another. In the 1980s and 1990s, online public access catalogues replaced card
            files in most research libraries, and many old cards were converted into
            machine-readable records.
            """
        ),
    ),
    Doc(
        "d38",
        "libraries",
        1841,
        "Panizzi's rules for the British Museum catalogue",
        prose(
            """
            Antonio Panizzi, an Italian exile who became Keeper of Printed Books at the
            British Museum, led the drafting of the museum's cataloguing rules, published
            in 1841. The 91 rules set out how to choose the main heading for a book, how to
            treat anonymous works, pseudonyms, translations and works by corporate bodies,
            and how to transcribe title pages. Panizzi argued that a catalogue should do
            more than list books: it should let a reader find a particular book and also
            see which other editions and related works the library held. The rules met
            opposition from trustees and readers who wanted a quick, simple list, and the
            dispute reached a Royal Commission, appointed in 1847, whose report largely
            supported Panizzi. He also planned the museum's circular Reading Room, opened in
            1857. Later codes, including Charles Ammi Cutter's Rules for a Printed
            Dictionary Catalogue of 1876 and the Anglo-American Cataloguing Rules of 1967,
            built on the principles he set out. The main entry, the single heading under
            which the full description of a work is filed, descends from this tradition.
            """
        ),
    ),
    Doc(
        "d39",
        "libraries",
        1968,
        "MARC records",
        prose(
            """
            # MARC records

            MARC, short for Machine-Readable Cataloging, is a family of formats for
            bibliographic records that computers can process. It was developed at the
            Library of Congress under Henriette Avram in the 1960s. A pilot project began in
            1966, and the MARC II format that followed in 1968 became the basis of later
            standards.

            ## Structure

            A MARC record consists of a leader, a directory and variable fields. Each field
            is identified by a three-digit tag: 100 holds the main author, 245 the title
            statement and 650 a topical subject heading. Within a field, subfields marked
            by single letters separate parts such as the title proper and the statement of
            responsibility, and indicators refine how a field is read.

            ## Shared cataloguing

            Machine-readable records could be copied between libraries on magnetic tape.
            OCLC, founded in 1967 as the Ohio College Library Center, built a shared online
            catalogue in which one library's record serves all members, and it grew into
            one of the largest bibliographic databases in the world.

            ## Today

            MARC 21, the harmonised version maintained since the late 1990s, is still
            widely used. The Library of Congress is developing BIBFRAME, a linked-data
            model, as its successor.
            """
        ),
    ),
    Doc(
        "d40",
        "libraries",
        1895,
        "Otlet, La Fontaine and the Universal Decimal Classification",
        prose(
            """
            Paul Otlet and Henri La Fontaine, two Belgian lawyers, set out in 1895 to build
            a universal bibliography, a record of everything ever published. In Brussels
            they founded the International Institute of Bibliography and began the
            Répertoire Bibliographique Universel, a catalogue on standard index cards that
            grew to more than twelve million entries. To arrange it they adapted Dewey's
            decimal classification into the Universal Decimal Classification, UDC. UDC
            keeps Dewey's numbered main classes but adds signs to combine numbers: a colon
            joins two subjects, so that a work about the relation between two topics can be
            described by linking their numbers. This makes UDC an early faceted, or
            analytico-synthetic, system. The institute also answered questions sent by
            post, searching the cards and mailing copies of the matching entries. Otlet
            later imagined documents being consulted from a distance through electrical
            devices, an idea often compared with the web. The collections survive in the
            Mundaneum archive in Mons. UDC is still used, particularly in European
            libraries, and is maintained by an international consortium.
            """
        ),
    ),
)


# --------------------------------------------------------------------------------------
# Queries, judgments (2 = highly relevant, 1 = partly relevant) and answers
# --------------------------------------------------------------------------------------

QUERIES: tuple[Query, ...] = (
    Query(
        "q01",
        "BM25 k1 b parameters term frequency saturation",
        "test",
        (("d01", 2), ("d03", 1), ("d29", 1)),
        ("between 1.2 and 2.0",),
    ),
    Query(
        "q02",
        "Why do ubiquitous words barely influence which results come first?",
        "test",
        (("d02", 2), ("d01", 1), ("d06", 1)),
        ("a poor discriminator between them",),
    ),
    Query(
        "q03",
        "HNSW approximate nearest neighbour index",
        "test",
        (("d10", 2), ("d13", 1), ("d32", 1)),
        ("Hierarchical Navigable Small World graphs", "HNSW"),
    ),
    Query(
        "q04",
        "How can software tell that two differently worded sentences mean the same thing?",
        "test",
        (("d08", 2), ("d09", 1), ("d11", 1)),
        ("vectors that lie close together",),
    ),
    Query(
        "q05",
        "nDCG graded relevance logarithmic discount",
        "test",
        (("d16", 2), ("d17", 1)),
        ("the base-2 logarithm of the rank plus one",),
    ),
    Query(
        "q06",
        "Which librarian first pitted catalogue schemes against each other using questions "
        "about aircraft research?",
        "test",
        (("d15", 2),),
        ("Cyril Cleverdon", "Cleverdon"),
    ),
    Query(
        "q07",
        "markdown headings chunking sections",
        "test",
        (("d25", 2), ("d24", 1)),
        ("splits a document at its headings",),
    ),
    Query(
        "q08",
        "How do language models cope with words they have never seen before?",
        "test",
        (("d22", 2), ("d23", 2)),
        ("split into several pieces", "subword units"),
    ),
    Query(
        "q09",
        "DuckDB full text search index rebuild after insert",
        "test",
        (("d29", 2), ("d28", 1)),
        ("it must be rebuilt",),
    ),
    Query(
        "q10",
        "Which Postgres index speeds up looking for words in long text columns?",
        "test",
        (("d31", 2), ("d30", 1)),
        ("GIN index", "GIN"),
    ),
    Query(
        "q11",
        "What scheme shelves library volumes by topic with numeric codes?",
        "test",
        (("d36", 2), ("d40", 1)),
        ("Dewey Decimal Classification",),
    ),
    Query(
        "q12",
        "reciprocal rank fusion lexical dense",
        "test",
        (("d14", 2),),
        ("1/(k + rank)",),
    ),
    Query(
        "q13",
        "mean reciprocal rank first relevant result",
        "train",
        (("d18", 2), ("d17", 1)),
        ("the reciprocal of the rank of the first relevant result",),
    ),
    Query(
        "q14",
        "Before computers, how could a reader look up everything an institution held?",
        "train",
        (("d37", 2), ("d38", 1), ("d39", 1)),
        ("card catalogue",),
    ),
    Query(
        "q15",
        "Porter stemmer suffix stripping",
        "train",
        (("d05", 2),),
        ("Martin Porter",),
    ),
    Query(
        "q16",
        "Can an ordinary SQL database keep embeddings and find the closest ones?",
        "train",
        (("d32", 2), ("d28", 1)),
        ("pgvector",),
    ),
)

SPLITS = ("test", "train")


# --------------------------------------------------------------------------------------
# Validation and writing
# --------------------------------------------------------------------------------------


class SampleError(ValueError):
    """The sample content breaks one of its rules."""


def gold_doc(query: Query) -> str:
    """The document the answers are taken from: the first one judged 2."""
    for doc_id, score in query.judgments:
        if score == 2:
            return doc_id
    raise SampleError(f"query {query.id}: no judgment with score 2")


def answer_starts(query: Query, docs: dict[str, Doc]) -> list[int]:
    """Character offsets (Python str indices) of each answer's first occurrence."""
    text = docs[gold_doc(query)].text
    starts = []
    for answer in query.answers:
        start = text.find(answer)
        if start < 0:
            raise SampleError(
                f"query {query.id}: answer {answer!r} not in text of {gold_doc(query)}"
            )
        starts.append(start)
    return starts


def validate(docs: tuple[Doc, ...], queries: tuple[Query, ...]) -> None:
    """Raise SampleError naming the first record that breaks a rule."""
    doc_ids = [d.id for d in docs]
    if len(set(doc_ids)) != len(doc_ids):
        raise SampleError("duplicate document ids")
    if doc_ids != sorted(doc_ids):
        raise SampleError("documents are not in id order")
    by_id = {d.id: d for d in docs}
    for d in docs:
        if d.topic not in TOPICS:
            raise SampleError(f"document {d.id}: unknown topic {d.topic!r}")
        words = len(d.text.split())
        if not MIN_WORDS <= words <= MAX_WORDS:
            raise SampleError(f"document {d.id}: {words} words, not in {MIN_WORDS}-{MAX_WORDS}")
        if d.text != d.text.strip() or "\r" in d.text or "  " in d.text:
            raise SampleError(f"document {d.id}: stray white space")
        if d.text.startswith("#") and d.text.splitlines()[0] != f"# {d.title}":
            raise SampleError(f"document {d.id}: first heading differs from the title")
    query_ids = [q.id for q in queries]
    if len(set(query_ids)) != len(query_ids) or query_ids != sorted(query_ids):
        raise SampleError("query ids are duplicated or not in order")
    for q in queries:
        if q.split not in SPLITS:
            raise SampleError(f"query {q.id}: unknown split {q.split!r}")
        if not 1 <= len(q.judgments) <= 4:
            raise SampleError(f"query {q.id}: {len(q.judgments)} judgments, want 1-4")
        judged = [doc_id for doc_id, _ in q.judgments]
        if len(set(judged)) != len(judged):
            raise SampleError(f"query {q.id}: a document is judged twice")
        for doc_id, score in q.judgments:
            if doc_id not in by_id:
                raise SampleError(f"query {q.id}: judged document {doc_id} does not exist")
            if score not in (1, 2):
                raise SampleError(f"query {q.id}: score {score} for {doc_id}, want 1 or 2")
        if not q.answers:
            raise SampleError(f"query {q.id}: no answers")
        text = by_id[gold_doc(q)].text
        for answer, start in zip(q.answers, answer_starts(q, by_id), strict=True):
            if text[start : start + len(answer)] != answer:
                raise SampleError(f"query {q.id}: offset {start} does not slice to {answer!r}")


def _jsonl(records: list[dict[str, object]]) -> str:
    return "".join(
        json.dumps(r, ensure_ascii=False, sort_keys=True, separators=(", ", ": ")) + "\n"
        for r in records
    )


def render(docs: tuple[Doc, ...], queries: tuple[Query, ...]) -> dict[str, str]:
    """The files of the collection: relative path -> text content."""
    validate(docs, queries)
    by_id = {d.id: d for d in docs}
    corpus = [
        {
            "_id": d.id,
            "title": d.title,
            "text": d.text,
            "metadata": {"topic": d.topic, "year": d.year},
        }
        for d in docs
    ]
    query_records = [{"_id": q.id, "text": q.text} for q in queries]
    answers = [
        {
            "_id": q.id,
            "corpus-id": gold_doc(q),
            "answers": list(q.answers),
            "answer_starts": answer_starts(q, by_id),
        }
        for q in queries
    ]
    files = {
        "corpus.jsonl": _jsonl(corpus),
        "queries.jsonl": _jsonl(query_records),
        "answers.jsonl": _jsonl(answers),
    }
    for split in SPLITS:
        lines = ["query-id\tcorpus-id\tscore\n"]
        for q in queries:
            if q.split == split:
                lines += [f"{q.id}\t{doc_id}\t{score}\n" for doc_id, score in q.judgments]
        files[f"qrels/{split}.tsv"] = "".join(lines)
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write into")
    parser.add_argument("--check", action="store_true", help="only compare with the files on disk")
    args = parser.parse_args(argv)
    try:
        files = render(DOCS, QUERIES)
    except SampleError as exc:
        print(f"make_sample.py: {exc}", file=sys.stderr)
        return 1
    stale = []
    for rel, content in sorted(files.items()):
        path = args.out / rel
        data = content.encode("utf-8")
        if args.check:
            if not path.is_file() or path.read_bytes() != data:
                stale.append(rel)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    if stale:
        print(f"make_sample.py: out of date: {', '.join(stale)}", file=sys.stderr)
        return 1
    n_words = sum(len(d.text.split()) for d in DOCS)
    print(
        f"{'checked' if args.check else 'wrote'} {len(files)} files: {len(DOCS)} documents "
        f"({n_words} words), {len(QUERIES)} queries"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
