-- A no-op: keeps the migrations' sequence unbroken.
SELECT 1;

---- create above / drop below ----

SELECT 1;
