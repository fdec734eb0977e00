"""spark_examples."""
