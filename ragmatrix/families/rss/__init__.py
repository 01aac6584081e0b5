"""RSS probes: does one embedding of a long text still remember each of its parts?

- `text_sources`: where the probe texts come from (built-in, local files, HF datasets);
- `mergers`: merger mode's pooling of chunk embeddings;
- `probes`: sampling, embedding and the Top-Down / Bottom-Up scores;
- `view`: what an item shows when it is opened.
"""

from ragmatrix.families.rss import report, view
from ragmatrix.families.rss.probes import SCORING_VERSION, RssCase, corpus_fingerprint, probe
from ragmatrix.seam.family import Family, Plot, Source
from ragmatrix.seam.headline import Headline

__all__ = ["FAMILY", "probe"]

FAMILY = Family(
    name="rss_probes",
    scoring_version=SCORING_VERSION,
    case_schema=RssCase,
    headline=Headline("RSS", "mean RSS (x500) over every sample of every length", scale="RSS x500"),
    source=Source(
        "the Finesse benchmark",
        "https://pypi.org/project/finesse-benchmark/",
        "Apache-2.0",
        "Relative Semantic Similarity, Top-Down and Bottom-Up, re-implemented from its description",
    ),
    # Mappings that are settings, not variant sets.
    plain_input_fields=("source", "lengths"),
    # The source text and any user merger are part of every result key.
    corpus_fingerprint=corpus_fingerprint,
    details=report.RssDetails,
    report_sections=(report.section,),
    plots=(Plot((report.PLOT,), report.draw),),
    item_view=view.VIEW,
)
