"""The supervisor forks its children from code it imported once, so they share those pages."""

import psutil


def test_children_share_most_of_their_memory_with_the_supervisor(mq):
    children = list(mq.children().values())
    assert len(children) == 7
    pss = sum(p.memory_full_info().pss for p in children)
    rss = sum(p.memory_info().rss for p in children)
    # A child started as a new interpreter keeps about 60 % of its resident pages to itself
    # (PSS/RSS near 0.6); forked ones about 15 %.
    assert pss < 0.35 * rss, f"children PSS {pss / 2**20:.0f} MB of RSS {rss / 2**20:.0f} MB"
    assert all(p.ppid() == mq.pid for p in children)
