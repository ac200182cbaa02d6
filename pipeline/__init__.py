"""mq on Apache Spark: the "mq" data source and the mq-pipeline jobs (docs/PIPELINE.md)."""


def register(spark) -> None:
    """Make spark.read/.write/.readStream/.writeStream .format("mq") available in this session."""
    from mq.pipeline.source import MqDataSource

    spark.dataSource.register(MqDataSource)
