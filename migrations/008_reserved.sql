-- Reserved: the number is taken by a change on another branch. This
-- placeholder keeps the sequence whole until it lands; drop this file then.
SELECT 1;

---- create above / drop below ----

SELECT 1;
