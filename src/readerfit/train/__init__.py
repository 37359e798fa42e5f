"""Training: EXIT classifier data (``readerfit train exit-data``) and the classifier itself (``readerfit train exit``)."""
