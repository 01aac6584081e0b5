"""RSS probes: does one embedding of a long text still remember each of its parts?

Cases: benchmark/data/rss_probes_data.yaml. The family: ragmatrix/families/rss/.
"""

from ragmatrix.families import rss


def test_rss_probes(embedder, case, record):
    """The embedder reads sequences of unrelated chunks; each prefix's synthesis must stay close
    to the chunks inside it and apart from the chunks still to come."""
    record(rss.probe(embedder, case))
