"""The recipe for wormchat's default chat model (see README.md here): corpus (data), tokenizer,
preparation (prep) and the training loop with export (loop). Run by ../train_model.py; the
model is wormref.falcon_ref's."""
